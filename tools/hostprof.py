"""Host time per call of the pieces between a softmax call and its launch."""
import time, numpy as np, cupy as cp
import cusoftmax as cs
from cupy_backends.cuda.api import driver

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
prm = p.prm
f32 = np.dtype(np.float32)
pool = cp.get_default_memory_pool()
res = {}
res["cupy.empty"] = per_call(lambda: cp.empty((4, 4), f32))
res["cupy.ndarray"] = per_call(lambda: cp.ndarray((4, 4), f32))
res["pool.malloc"] = per_call(lambda: pool.malloc(64))
res["cupy.cuda.alloc"] = per_call(lambda: cp.cuda.alloc(64))
res["ndarray(memptr)"] = per_call(lambda: cp.ndarray((4, 4), f32, cp.cuda.alloc(64)))
res["get_current_stream"] = per_call(lambda: cp.cuda.get_current_stream().ptr)
res["getDevice"] = per_call(lambda: cp.cuda.runtime.getDevice())
def raw():
    driver.launchKernel(ln.fptr, 1, 1, 1, 128, 1, 1, 0, 0, prm.addr, 0)
res["launchKernel raw"] = per_call(raw)
def setv():
    v = prm.vals; v[0] = x.data.ptr; v[1] = y.data.ptr
res["ctypes set 2"] = per_call(setv)
def lk():
    prm.lock.acquire(); prm.lock.release()
res["lock"] = per_call(lk)
res["key build"] = per_call(lambda: (x.shape, x.strides, x.dtype, -1, None, "auto", False, x.data.ptr & 15, x.data.device_id, None))
res["fast launch"] = per_call(lambda: ln.fast(prm, x.data.ptr, y.data.ptr))
res["RawKernel call"] = per_call(lambda: ln.fn(ln.grid, ln.block, (x.data.ptr, y.data.ptr, 4, 4, 4, 4)))
res["cusoftmax.softmax"] = per_call(lambda: cs.softmax(x))
res["cusoftmax.log_softmax"] = per_call(lambda: cs.log_softmax(x))
res["softmax(out=y)"] = per_call(lambda: cs.softmax(x, out=y))
try:
    import torch
    xt = torch.as_tensor(x, device="cuda")
    res["torch.softmax"] = per_call(lambda: torch.softmax(xt, -1))
    res["torch.empty"] = per_call(lambda: torch.empty((4, 4), device="cuda"))
except Exception as e:
    print("torch:", e)
for k, v in res.items():
    print(f"{k:24s} {v:7.2f} us/call")
