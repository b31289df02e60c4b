"""Quick GPU smoke check of every forward regime against the reference."""
import time, traceback
import numpy as np, cupy as cp
import cusoftmax as cs
from cusoftmax import reference as ref
from cusoftmax._api import _cache

def check(shape, dtype="float32", axis=-1, log=False, algorithm="auto", layout="c", seed=0):
    rng = np.random.default_rng(seed)
    xh = (rng.standard_normal(shape) * 3).astype(np.float32)
    if dtype == "bfloat16":
        import ml_dtypes; x = cp.asarray(xh.astype(ml_dtypes.bfloat16))
    else:
        x = cp.asarray(xh.astype(dtype))
    if layout == "f":
        x = cp.asfortranarray(x)
    elif layout == "slice":
        x = x[..., 1:]
    elif layout == "neg":
        x = x[..., ::-1]
    f = cs.log_softmax if log else cs.softmax
    y = f(x, axis=axis, algorithm=algorithm)
    cp.cuda.runtime.deviceSynchronize()
    r = (ref.log_softmax if log else ref.softmax)(x, axis=axis)
    yy = ref.to_float64(y)
    err = np.nanmax(np.abs(yy - r)) if yy.size else 0
    key = [k for k in _cache if k[0] == x.shape and k[1] == x.strides]
    regime = _cache[key[-1]].launch.plan.regime if key and hasattr(_cache[key[-1]], 'launch') else '?'
    return err, regime

cases = []
for shape in [(7, 3), (1000, 17), (64, 128), (300, 1000), (33, 1025), (5, 4096), (3, 32768), (4, 32769),
              (3, 100000), (2, 262144), (2, 262145), (1, 1000000), (300, 300000), (1, 128256), (8, 128256)]:
    for dt in ["float32", "bfloat16", "float16", "float64"]:
        for log in (False, True):
            cases.append(dict(shape=shape, dtype=dt, log=log))
for shape in [(200, 16384), (300, 50257), (140, 65536), (133, 9000)]:
    for dt in ["float32", "bfloat16", "float16", "float64"]:
        for log in (False, True):
            cases.append(dict(shape=shape, dtype=dt, log=log))
cases.append(dict(shape=(200, 20001), layout="slice"))
cases.append(dict(shape=(200, 40001), layout="slice", dtype="bfloat16"))
for algo in ["naive", "safe", "online"]:
    cases.append(dict(shape=(50, 5000), algorithm=algo))
    cases.append(dict(shape=(50, 5000), algorithm=algo, log=True))
for lay in ["f", "slice", "neg"]:
    for shape in [(64, 100), (1000, 3000), (4, 50000)]:
        cases.append(dict(shape=shape, layout=lay))
cases += [dict(shape=(100, 64, 33), axis=1), dict(shape=(4096, 1024), axis=0), dict(shape=(8, 9, 10), axis=(0, 2)),
          dict(shape=(8, 9, 10), axis=None), dict(shape=(5, 3000, 7), axis=1)]
bad = 0
t0 = time.time()
for c in cases:
    try:
        err, regime = check(**c)
        tol = {"float32": 1e-5, "float64": 1e-12, "bfloat16": 1e-2, "float16": 2e-3}[c.get("dtype", "float32")]
        if c.get("log"): tol *= 20
        ok = err <= tol
        bad += not ok
        print(("OK  " if ok else "BAD ") + f"{err:.3g} {regime} {c}", flush=True)
    except Exception:
        bad += 1
        print("EXC", c); traceback.print_exc()
print("bad", bad, "of", len(cases), "in", time.time() - t0)
