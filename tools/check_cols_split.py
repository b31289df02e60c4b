"""Quick GPU check of the split column kernels (softmax_cols_split_*) launched
directly over a range of plans, against the float64 reference, special values
included. Prints one line per failing case and a summary line."""
import itertools, sys
import numpy as np, cupy as cp
from cusoftmax import _dispatch as D, reference as ref
from cusoftmax._launch import Launch, device_info


def main():
    dev = device_info(0)
    rng = np.random.default_rng(0)
    shapes = [(1, 129, 1), (1, 300, 3), (2, 1000, 64), (3, 4097, 33), (1, 5000, 256), (2, 777, 1000),
              (1, 70000, 8), (5, 20000, 40)]
    pairs = [("float32", "float32"), ("bfloat16", "bfloat16"), ("float16", "float16"),
             ("bfloat16", "float32"), ("float64", "float64"), ("float32", "float64")]
    bad = n = 0
    import ml_dtypes
    npdt = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16, "float32": np.float32, "float64": np.float64}
    tol = {"bfloat16": 1e-2, "float16": 2e-3, "float32": 2e-6, "float64": 1e-13}
    for (O, L, I), (ti, to), log, seg, bps in itertools.product(shapes, pairs, (False, True), (128, 512), (1, 8)):
        xh = (rng.standard_normal((O, L, I)) * 4).astype(npdt[ti])
        if I > 4:
            xh[:, :, 1] = -np.inf
            xh[:, L // 2, 2] = np.nan
            xh[:, L - 1, 3] = np.inf
            xh[:, 0, 4] = -np.inf
        x = cp.asarray(xh)
        y = cp.full((O, L, I), np.nan, npdt[to])
        isz = x.dtype.itemsize
        vmax = 16 // max(isz, y.dtype.itemsize)
        for vec in sorted({1, vmax if I % vmax == 0 else 1}):
            plan = D._plan_cols_split(O, L, I, ti, to, log, dev, vec, seg, bps)
            ln = Launch(plan, 0)
            y.fill(np.nan)
            ln.cols(x.data.ptr, y.data.ptr, O, L, I, L * I, I, L * I, I)
            r = (ref.log_softmax if log else ref.softmax)(xh.astype(np.float64), axis=1)
            got = cp.asnumpy(y).astype(np.float64)
            n += 1
            same_nan = np.array_equal(np.isnan(got), np.isnan(r))
            fin = np.isfinite(r)
            both_inf = np.array_equal(np.isneginf(got), np.isneginf(r))
            scale = np.maximum(np.abs(r[fin]), 1.0) if log else 1.0
            err = float(np.max(np.abs(got[fin] - r[fin]) / scale)) if fin.any() else 0.0
            if not (same_nan and both_inf and err <= tol[to] * (8 if ti != to else 4)):
                bad += 1
                print(f"BAD {O}x{L}x{I} {ti}->{to} log={log} seg={seg} bps={bps} vec={vec} "
                      f"grid={plan.grid} lps={plan.extra[1]} nan_ok={same_nan} inf_ok={both_inf} err={err:.3g}")
    print(f"check_cols_split: {n} cases, {bad} bad")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
