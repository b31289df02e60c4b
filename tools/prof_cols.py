"""Run a few strided-axis plans once each (for ncu): split and staged on
(1, 2048, 4096) float32 / bfloat16 reduced over axis 1."""
import sys
import cupy as cp
from cusoftmax import _dispatch as D
from cusoftmax._launch import Launch, device_info
from tune_cols import make

dev = device_info(0)
for dt in ("float32", "bfloat16"):
    O, L, I = 1, 2048, 4096
    x = make((O, L, I), dt)
    y = cp.empty_like(x)
    isz = x.dtype.itemsize
    plans = [("split", D._plan_cols_split(O, L, I, dt, dt, False, dev, 16 // isz, 256, 4, 8)),
             ("dispatch", D.plan_cols(O, L, I, dt, dt, False, dev, 16 // isz))]
    for name, plan in plans:
        ln = Launch(plan, 0)
        ln.cols(x.data.ptr, y.data.ptr, O, L, I, L * I, I, L * I, I)
    cp.cuda.runtime.deviceSynchronize()
print("done")
