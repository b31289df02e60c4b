"""Host time per call of the pieces between a softmax call and its launch."""
import time, numpy as np, cupy as cp
import cusoftmax as cs

def per_call(f, n=3000):
    for _ in range(200): f()
    cp.cuda.runtime.deviceSynchronize()
    best = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(n): f()
        best.append((time.perf_counter() - t) / n * 1e6)
        cp.cuda.runtime.deviceSynchronize()
    return min(best)

x = cp.random.standard_normal((4, 4), dtype=cp.float32)
y = cp.empty_like(x)
from cusoftmax._api import _cache
cs.softmax(x)
p = [v for k, v in _cache.items() if k[0] == (4, 4)][0]
ln = p.launch
res = {}
res["cupy.empty"] = per_call(lambda: cp.empty((4, 4), cp.float32))
res["RawKernel call"] = per_call(lambda: ln.fn(ln.grid, ln.block, (x.data.ptr, y.data.ptr, 4, 4, 4, 4)))
res["fast launch"] = per_call(lambda: ln.fast(p.prm, x.data.ptr, y.data.ptr))
res["cusoftmax.softmax"] = per_call(lambda: cs.softmax(x))
res["cusoftmax.log_softmax"] = per_call(lambda: cs.log_softmax(x))
try:
    import torch
    xt = torch.as_tensor(x, device="cuda")
    res["torch.softmax"] = per_call(lambda: torch.softmax(xt, -1))
    res["torch.empty"] = per_call(lambda: torch.empty((4, 4), device="cuda"))
except Exception as e:
    print("torch:", e)
for k, v in res.items():
    print(f"{k:24s} {v:7.2f} us/call")
