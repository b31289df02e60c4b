"""``python -m cusoftmax``: self-check against the float64 reference.

On a GPU: runs every public operation on sample data, compares with
``cusoftmax.reference`` and prints (operation, shape, dtype, max error, time).
Without a usable GPU: says so in one line and exits with status 1.
"""
from __future__ import annotations

import sys


def _gpu_ok():
    try:
        import cupy
        n = cupy.cuda.runtime.getDeviceCount()
        return n > 0, ("" if n > 0 else "CUDA reports no devices")
    except Exception as e:  # noqa: BLE001 - any failure means "no GPU"
        return False, f"{type(e).__name__}: {e}"


def _cases():
    import numpy as np
    import cusoftmax as cs
    from cusoftmax import reference as ref

    rng = np.random.default_rng(0)
    cases = []
    for shape in [(4096, 128), (64, 4096), (8, 128256), (4096, 50257)]:
        for dt in ("float32", "bfloat16"):
            cases.append(("softmax", shape, dt, lambda x: cs.softmax(x), lambda x: ref.softmax(x)))
            cases.append(("log_softmax", shape, dt, lambda x: cs.log_softmax(x),
                          lambda x: ref.log_softmax(x)))
    if hasattr(cs, "softmax_backward"):
        for shape in [(4096, 1024), (8, 128256)]:
            cases.append(("softmax_backward", shape, "float32",
                          lambda x: cs.softmax_backward(cs.softmax(x), x * 0.5),
                          lambda x: ref.softmax_backward(ref.softmax(x), ref.to_float64(x) * 0.5)))
            cases.append(("log_softmax_backward", shape, "float32",
                          lambda x: cs.log_softmax_backward(cs.log_softmax(x), x * 0.5),
                          lambda x: ref.log_softmax_backward(ref.log_softmax(x),
                                                             ref.to_float64(x) * 0.5)))
    if hasattr(cs, "softmax_topk"):
        for shape, k in [((4096, 32000), 5), ((1, 128256), 50)]:
            cases.append((f"softmax_topk k={k}", shape, "float32",
                          lambda x, k=k: cs.softmax_topk(x, k).values,
                          lambda x, k=k: ref.softmax_topk(x, k).values))
    return rng, cases


def main() -> int:
    ok, why = _gpu_ok()
    if not ok:
        print(f"cusoftmax self-check: no usable CUDA GPU ({why}); nothing was run.")
        return 1
    import numpy as np
    import cupy
    from cusoftmax import reference as ref

    rng, cases = _cases()
    dev = cupy.cuda.Device()
    props = cupy.cuda.runtime.getDeviceProperties(dev.id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    print(f"cusoftmax self-check on {name} (device {dev.id})")
    print(f"{'operation':<24}{'shape':<16}{'dtype':<10}{'max abs err':>12}{'time (us)':>11}  ok")
    bad = 0
    tol = {"float32": 1e-5, "bfloat16": 2e-2}
    for op, shape, dt, fn, rfn in cases:
        xh = rng.standard_normal(shape).astype(np.float32) * 2
        x = cupy.asarray(xh)
        if dt == "bfloat16":
            import ml_dtypes
            x = cupy.asarray(xh.astype(ml_dtypes.bfloat16))
        y = fn(x)
        cupy.cuda.runtime.deviceSynchronize()
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        for _ in range(10):
            fn(x)
        end.record()
        end.synchronize()
        us = cupy.cuda.get_elapsed_time(start, end) * 100.0
        err = float(np.nanmax(np.abs(ref.to_float64(y) - rfn(x))))
        good = err <= tol[dt] * (10 if "log" in op else 1)
        bad += not good
        print(f"{op:<24}{str(shape):<16}{dt:<10}{err:>12.2e}{us:>11.1f}  {'yes' if good else 'NO'}")
    print("all checks passed" if not bad else f"{bad} check(s) FAILED")
    return 0 if not bad else 2


if __name__ == "__main__":
    sys.exit(main())
