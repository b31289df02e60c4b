"""Does softmax_cols_cl lose time to how its clusters are placed on SMs?

    PYTHONPATH=.:tools python tools/cl_spread.py [--log] [--dtypes ...] [--shapes OxLxI,...] [--pads 0,56,80]

ncu of the float32 (1000, 1000) cl launch (256 blocks in clusters of 8, up to
4 blocks an SM by registers) showed SM active cycles at 65% of the elapsed
cycles: 256 / 3 = 85 of 132 SMs. Here each cl plan of the layout table's
shapes is launched with unused dynamic shared memory (--pads, KiB) that caps
the blocks an SM (none / 3 / 2 / 1 at 0 / 56 / 80 / 120 KiB with the kernel's
~8 KiB static), timed as tools/ab_cols.py does (CUDA events, L2 flushed,
min over rounds of a median of 30), its output checked against the float64
reference on a few columns, and the SMs its blocks ran on counted by a
probe launch of the same grid, cluster size and shared memory that records
%smid (histogram: how many SMs ran 0, 1, 2, ... blocks).
"""
import argparse
import dataclasses
from collections import Counter

import numpy as np
import cupy as cp

import cusoftmax as cs
from cusoftmax import _dispatch as D, reference as ref
from cusoftmax._launch import Launch, device_info, max_active_clusters
from tune import min_over_rounds
from tune_cols import make
from layout_table import SHAPES

PROBE = r'''
template <int CL>
__global__ void __cluster_dims__(CL, 1, 1) __launch_bounds__(256, 1)
probe(unsigned* sm, unsigned long long spin) {
  extern __shared__ unsigned char pad[];
  if (threadIdx.x == 0) {
    unsigned id;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
    sm[blockIdx.y * gridDim.x + blockIdx.x] = id;
    pad[0] = (unsigned char)id;
    unsigned long long t0 = clock64();
    while (clock64() - t0 < spin) {}
  }
}
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", action="store_true")
    ap.add_argument("--dtypes", default="float32,bfloat16,float16")
    ap.add_argument("--shapes", default=None)
    ap.add_argument("--pads", default="0,56,80,120")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    shapes = SHAPES if not a.shapes else [tuple(int(n) for n in s.split("x")) for s in a.shapes.split(",")]
    pads = [int(p) * 1024 for p in a.pads.split(",")]
    dev = device_info(0)
    fn = cs.log_softmax if a.log else cs.softmax
    rf = ref.log_softmax if a.log else ref.softmax
    mod = cp.RawModule(code=PROBE, options=("-std=c++17",), name_expressions=[f"probe<{c}>" for c in (1, 2, 4, 8)])
    print(f"# {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, "
          f"{'log_softmax' if a.log else 'softmax'}, us (min over rounds of a median of 30); "
          f"per pad: time, ratio to contiguous, max active clusters, SMs by blocks run (0:n 1:n ...)", flush=True)
    for dt in a.dtypes.split(","):
        for O, L, I in shapes:
            x = make((O, L, I), dt)
            vec = 16 // x.dtype.itemsize if I % (16 // x.dtype.itemsize) == 0 else 1
            plan = D.plan_cols(O, L, I, dt, dt, a.log, dev, vec)
            if "softmax_cols_cl" not in plan.kernel:
                continue
            xc = make((O * I, L), dt)
            y = cp.empty_like(x)
            cols = sorted({0, 1, I // 2, I - 2, I - 1} & set(range(I)))
            r = rf(x[:, :, cols], axis=1)
            cl = plan.grid[0]
            fs, info = {"contig": lambda: fn(xc, axis=-1)}, {}
            for p in pads:
                ln = Launch(dataclasses.replace(plan, smem=p), 0)
                f = (lambda ln=ln: ln.cols(x.data.ptr, y.data.ptr, O, L, I, L * I, I, L * I, I))
                y.fill(0)
                f()
                err = float(np.nanmax(np.abs(ref.to_float64(y[:, :, cols]) - r) / np.maximum(1, np.abs(r))))
                fit = max_active_clusters(ln.fn, cl, plan.block[0], p)
                # the probe's shared memory: the kernel's (static + pad), or
                # more where the kernel's registers cap the blocks an SM
                by_regs = 65536 // (-(-ln.fn.num_regs // 8) * 8 * plan.block[0])
                ps = max(p + ln.fn.shared_size_bytes, int(228 * 1024 / (by_regs + 0.5)) - 1024)
                pf = mod.get_function(f"probe<{cl}>")
                pf.max_dynamic_shared_size_bytes = ps
                sm = cp.zeros(plan.grid[0] * plan.grid[1], dtype=cp.uint32)
                pf(plan.grid, (256,), (sm, np.uint64(200000)), shared_mem=ps)
                cp.cuda.runtime.deviceSynchronize()
                per = Counter(Counter(sm.get().tolist()).values())
                per[0] = dev.sm_count - sum(per.values())
                hist = " ".join(f"{k}:{per[k]}" for k in sorted(per))
                fs[p] = f
                info[p] = (err, fit, hist)
            b = min_over_rounds(fs, a.rounds)
            tol = 1e-5 if dt == "float32" else 1e-2
            print(f"{dt:9s} {(O, L, I)} nr{plan.extra[3]} c{cl} grid {plan.grid} contig {b['contig']:5.1f} | "
                  + " | ".join(f"pad{p // 1024}K {b[p]:5.1f} {b[p] / b['contig']:.2f}x fit {info[p][1]} [{info[p][2]}]"
                               + (" WRONG" if info[p][0] > tol else "") for p in pads), flush=True)
            del x, xc, y
            cp.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    main()
