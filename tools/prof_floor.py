"""The timing floor of the flushed-event harness (tools/tune.py timeit): an
empty kernel, a one-block kernel reading 16 KB, and cusoftmax.softmax on a
few row shapes, for comparison with the top-k kernels."""
import cupy as cp
import cusoftmax as cs
from tune import timeit

k_empty = cp.RawKernel(r'extern "C" __global__ void e(){}', "e")
k_read = cp.RawKernel(r'''extern "C" __global__ void r(const float* x, float* y, int n){
  float s = 0; for (int i = threadIdx.x; i < n; i += blockDim.x) s += x[i];
  if (s == 12345.f) y[0] = s; }''', "r")
b = cp.ones(4096, cp.float32); o = cp.empty(1, cp.float32)
print(f"empty kernel {timeit(lambda: k_empty((1,), (32,), ())):6.2f} us")
print(f"1 block reads 16 KB {timeit(lambda: k_read((1,), (256,), (b, o, cp.int32(4096)))):6.2f} us")
for R, L in [(1, 32768), (1, 128256), (64, 128256)]:
    x = cp.random.RandomState(0).standard_normal((R, L), dtype=cp.float32)
    print(f"softmax {R}x{L} {timeit(lambda: cs.softmax(x)):6.2f} us")
