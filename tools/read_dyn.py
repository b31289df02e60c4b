"""Does dynamic work distribution shorten topk_seg's streaming? (diagnostic,
issue 5 target 2a.) Pure-read kernels in topk_seg's geometry (grid (S, rows),
256 threads, one warp a segment of 128 16-byte packs: 4 loads a lane), the
segments handed out
  static: block s of row r takes segments [s * spb, (s + 1) * spb), warp-cyclic (topk_seg's order);
  row:    each warp takes its row's next segment from a per-row counter (atomicAdd, one grab ahead);
  global: each warp takes the next segment of the whole array (row-major) from one counter;
  global4: the same, four segments a grab;
beside the read-floor kernel (grid-stride, 2 loads in flight a thread, 528 blocks of 512). Timed like the
benchmark (CUDA events, L2 flushed by a 256 MiB memset, median of 30), plus %globaltimer stamps (block entry,
block end) over 15 launches: last entry, first / last block end after the earliest entry, medians.
    PYTHONPATH=.:tools:tests python tools/read_dyn.py [R,L ...]"""
import sys

import numpy as np
import cupy as cp

from tune import timeit, FLUSH
from read_floor import SRC as FLOOR_SRC  # its rd<U> (and empty) kernels

SRC = r'''
#define SEGP 128
typedef unsigned long long u64;
__device__ __forceinline__ u64 gtime() { u64 t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
__device__ __forceinline__ float seg_sum(const float4* __restrict__ row, long long j, long long np, int lane) {
  float4 v[4];
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const long long p = j * SEGP + u * 32 + lane;
    v[u] = p < np ? __ldg(row + p) : make_float4(0.f, 0.f, 0.f, 0.f);
  }
  float a = 0.f;
#pragma unroll
  for (int u = 0; u < 4; ++u) a += fmaxf(fmaxf(v[u].x, v[u].y), fmaxf(v[u].z, v[u].w));
  return a;
}
template <int MODE>
__global__ void __launch_bounds__(256, 4) rd_seg(const float4* __restrict__ x, long long np, int W, int spb,
                                                 unsigned* __restrict__ ctr, u64* __restrict__ stamp,
                                                 float* __restrict__ y) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  const long long r = blockIdx.y;
  const int s = blockIdx.x;
  const long long bid = r * gridDim.x + s;
  if (threadIdx.x == 0) stamp[2 * bid] = gtime();
  float a = 0.f;
  if (MODE == 0) {
    const int jb = s * spb, je = min(W, jb + spb);
    for (int j = jb + warp; j < je; j += nw) a += seg_sum(x + r * np, j, np, lane);
  } else if (MODE == 1) {
    unsigned j = 0;
    if (lane == 0) j = atomicAdd(ctr + r, 1u);
    j = __shfl_sync(0xffffffffu, j, 0);
    while (j < (unsigned)W) {
      unsigned nj = 0;
      if (lane == 0) nj = atomicAdd(ctr + r, 1u);
      a += seg_sum(x + r * np, j, np, lane);
      j = __shfl_sync(0xffffffffu, nj, 0);
    }
  } else {
    constexpr int G = MODE == 2 ? 1 : 4;
    const unsigned total = (unsigned)(gridDim.y * W);
    unsigned g = 0;
    if (lane == 0) g = atomicAdd(ctr, (unsigned)G);
    g = __shfl_sync(0xffffffffu, g, 0);
    while (g < total) {
      unsigned ng = 0;
      if (lane == 0) ng = atomicAdd(ctr, (unsigned)G);
#pragma unroll 1
      for (int q = 0; q < G && g + q < total; ++q) {
        const unsigned gg = g + q;
        a += seg_sum(x + (long long)(gg / W) * np, gg % W, np, lane);
      }
      g = __shfl_sync(0xffffffffu, ng, 0);
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) stamp[2 * bid + 1] = gtime();
  if (a == 1.2345e-30f) y[0] = a;
}
'''
MODES = {"static": "rd_seg<0>", "row": "rd_seg<1>", "global": "rd_seg<2>", "global4": "rd_seg<3>"}


def main():
    shapes = [tuple(int(v) for v in a.split(",")) for a in sys.argv[1:]] or [
        (64, 128256), (64, 262144), (64, 32768), (8, 128256)]
    mod = cp.RawModule(code=SRC + FLOOR_SRC, options=("-std=c++17",),
                       name_expressions=list(MODES.values()) + ["rd<2>"])
    fns = {m: mod.get_function(n) for m, n in MODES.items()}
    frd = mod.get_function("rd<2>")
    sms = cp.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"]
    name = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"# {name}, {sms} SMs; events: median of 30 (L2 flushed); stamps: median of 15 launches, us after the "
          "earliest block entry", flush=True)
    y = cp.zeros(1, cp.float32)
    pool = cp.zeros(1 << 22, cp.uint32)  # fresh counters for every launch
    for R, L in shapes:
        x = cp.random.RandomState(R + L).standard_normal((R, L), dtype=cp.float32)
        np_ = L // 4
        W = -(-np_ // 128)
        S = min(8 if R >= 16 else 32, W)
        S = max(1, min(S, 4 * sms // R)) if R <= 64 else S
        spb = -(-W // S)
        stamp = cp.zeros(2 * S * R, cp.uint64)
        n4 = x.nbytes // 16
        g = min(4 * sms, -(-n4 // 512))
        base = timeit(lambda: frd((g,), (512,), (x, np.int64(n4), y)))
        print(f"{R:>3}x{L:<7} f32 {x.nbytes / 1e6:6.2f} MB  W={W} grid=({S}, {R}) spb={spb} | read floor kernel "
              f"(rd<2> g{g} t512) {base:6.2f}", flush=True)
        for m, f in fns.items():
            pos = [0]

            def launch():
                c = pool[pos[0]:pos[0] + max(R, 1)]
                pos[0] = (pos[0] + max(R, 1)) % (pool.size - 1024)
                f((S, R), (256,), (x, np.int64(np_), np.int32(W), np.int32(spb), c, stamp, y))
            pool.fill(0)
            ev = timeit(launch)
            pool.fill(0)
            pos[0] = 0
            res = []
            for _ in range(15):
                FLUSH.fill(1)
                cp.cuda.runtime.deviceSynchronize()
                launch()
                cp.cuda.runtime.deviceSynchronize()
                t = cp.asnumpy(stamp).astype(np.int64).reshape(-1, 2)
                t0 = t[:, 0].min()
                res.append([(t[:, 0].max() - t0) / 1e3, (t[:, 1].min() - t0) / 1e3, (t[:, 1].max() - t0) / 1e3])
            m3 = np.median(np.array(res), axis=0)
            print(f"    {m:8} events {ev:6.2f} | last entry {m3[0]:5.2f} | block end first {m3[1]:6.2f} "
                  f"last {m3[2]:6.2f}", flush=True)


if __name__ == "__main__":
    main()
