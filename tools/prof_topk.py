"""Where the time of softmax_topk on few long rows goes: the public call
(CUDA events, L2 flushed, median of 30), its stream and merge kernels timed
alone the same way, and the host time per call (no synchronisation).
Usage: python tools/prof_topk.py [R,L,k ...]"""
import sys
import time

import numpy as np
import cupy as cp

import cusoftmax as cs
from cusoftmax import _topk
from tune import timeit, FLUSH


def host_us(fn, n=300):
    for _ in range(20):
        fn()
    cp.cuda.runtime.deviceSynchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    cp.cuda.runtime.deviceSynchronize()
    return (t1 - t0) / n * 1e6


def main():
    shapes = [tuple(int(v) for v in a.split(",")) for a in sys.argv[1:]] or [
        (1, 32768, 1), (1, 32768, 50), (1, 128256, 1), (1, 128256, 5), (1, 128256, 50),
        (8, 128256, 50), (64, 32768, 50), (64, 128256, 5), (64, 128256, 50), (64, 262144, 50),
        (512, 32000, 50), (4096, 131072, 50)]
    for R, L, k in shapes:
        x = cp.random.RandomState(R + L + k).standard_normal((R, L), dtype=cp.float32)
        cs.softmax_topk(x, k)
        key = next(kk for kk in _topk._cache if kk[0] == x.shape and kk[3] == k)
        p = _topk._cache[key]
        pl = p.plan
        t_call = timeit(lambda: cs.softmax_topk(x, k))
        vals = cp.empty((R, k), cp.float32)
        idx = cp.empty((R, k), cp.int64)
        wsk = cp.empty(R * pl.splits * pl.kp * pl.cand_bytes, np.uint8)
        wsm = cp.empty(2 * R * pl.splits, np.float32)
        sargs = (x.data.ptr, vals.data.ptr, idx.data.ptr, wsk.data.ptr, wsm.data.ptr, R, L, L, k, pl.kp,
                 pl.inc, int(pl.block_lists), pl.pps, p.code, 0)
        t_stream = timeit(lambda: p.fn(pl.grid, pl.block, sargs, shared_mem=pl.smem))
        t_merge = float("nan")
        if pl.splits > 1:
            margs = (wsk.data.ptr, wsm.data.ptr, vals.data.ptr, idx.data.ptr, R, k, pl.kp, pl.splits, p.code, 0)
            t_merge = timeit(lambda: p.merge_fn(pl.merge_grid, pl.merge_block, margs, shared_mem=pl.merge_smem))
        h = host_us(lambda: cs.softmax_topk(x, k))
        print(f"{R:>5}x{L:<7} k={k:<3} {pl.regime:6} grid={pl.grid} block={pl.block} splits={pl.splits} "
              f"pps={pl.pps}: call {t_call:7.2f} us | stream {t_stream:7.2f} | merge {t_merge:6.2f} | "
              f"host {h:6.2f} us/call", flush=True)


if __name__ == "__main__":
    main()
