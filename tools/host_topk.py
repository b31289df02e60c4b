"""Host time per softmax_topk call (no synchronisation, warm; median of 5 x
2000 calls, as the benchmark's host-time row): the direct launch with
prebuilt arguments against the general path of the same cached plan, and
torch.topk(torch.softmax(x)) when importable.
Usage: PYTHONPATH=. python tools/host_topk.py"""
import statistics
import time

import cupy as cp

import cusoftmax as cs
from cusoftmax import _topk


def per_call(fn, n=2000, rounds=5):
    for _ in range(200):
        fn()
    cp.cuda.runtime.deviceSynchronize()
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        out.append((time.perf_counter() - t0) / n * 1e6)
        cp.cuda.runtime.deviceSynchronize()
    return statistics.median(out)


def main():
    try:
        import torch
    except ImportError:
        torch = None
    for shape, k in (((4, 4), 2), ((1, 128256), 50), ((8, 32000), 5), ((64, 128256), 50)):
        x = cp.random.standard_normal(shape, dtype=cp.float32)
        cs.softmax_topk(x, k)
        p = next(v for kk, v in _topk._cache.items() if kk[0] == x.shape and kk[3] == k)
        fast = per_call(lambda: cs.softmax_topk(x, k)) if p.fast is not None else float("nan")
        saved, p.fast = p.fast, None
        slow = per_call(lambda: cs.softmax_topk(x, k))
        p.fast = saved
        line = f"{str(shape):14} k={k:<3} {p.plan.regime:6} direct {fast:6.2f} us | general {slow:6.2f} us"
        if torch is not None:
            xt = torch.from_dlpack(x)
            line += f" | torch {per_call(lambda: torch.topk(torch.softmax(xt, -1), k)):6.2f} us"
        print(line, flush=True)


if __name__ == "__main__":
    main()
