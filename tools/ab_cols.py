"""A/B of a softmax.cu / common.cuh edit on the strided-axis (cols) plans:
the dispatcher's plan for each (O, L, I) of tools/layout_table.py (reduction
along L of a C-ordered array) launched from kernels/_old_softmax.cu and from
the current source, alternating, 3 rounds of a median of 30 (CUDA events, L2
flushed before every repetition: tools/tune.py timeit), with the contiguous
time of the same elements beside them; outputs compared bit for bit and with
the float64 reference on a few columns.

The old side is the previous commit's source copied by hand, with its
common.cuh as kernels/_old_common.cuh when the edit touches that header:

    git show HEAD:kernels/softmax.cu | sed 's/"common.cuh"/"_old_common.cuh"/' > kernels/_old_softmax.cu
    git show HEAD:kernels/common.cuh > kernels/_old_common.cuh
    PYTHONPATH=.:tools python tools/ab_cols.py [--log] [--dtypes ...] [--shapes OxLxI,...]
        [--sources _old_softmax.cu,softmax.cu,...]

With more than two --sources (variants of the source, e.g. the current one
with a different experiment macro #defined on its first line), one line a
shape: each source's time and its ratio to contiguous.

(Both files are untracked scratch: delete them before committing.)
"""
import argparse
import dataclasses

import numpy as np
import cupy as cp

import cusoftmax as cs
from cusoftmax import _dispatch as D, reference as ref
from cusoftmax._launch import Launch, device_info
from tune import min_over_rounds
from tune_cols import make
from layout_table import SHAPES


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", action="store_true")
    ap.add_argument("--dtypes", default="bfloat16,float16,float32")
    ap.add_argument("--shapes", default=None, help="OxLxI,... (default: layout_table.py's)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sources", default="_old_softmax.cu,softmax.cu",
                    help="files of kernels/ to compare (the first is the baseline of the ratios)")
    a = ap.parse_args()
    shapes = SHAPES if not a.shapes else [tuple(int(n) for n in s.split("x")) for s in a.shapes.split(",")]
    dev = device_info(0)
    fn = cs.log_softmax if a.log else cs.softmax
    rf = ref.log_softmax if a.log else ref.softmax
    print(f"# {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, "
          f"{'log_softmax' if a.log else 'softmax'}, us (min over rounds of a median of 30)", flush=True)
    for dt in a.dtypes.split(","):
        for O, L, I in shapes:
            x = make((O, L, I), dt)
            xc = make((O * I, L), dt)
            vec = 16 // x.dtype.itemsize if I % (16 // x.dtype.itemsize) == 0 else 1
            plan = D.plan_cols(O, L, I, dt, dt, a.log, dev, vec)
            y = cp.empty_like(x)
            cols = sorted({0, 1, I // 2, I - 2, I - 1} & set(range(I)))
            r = rf(x[:, :, cols], axis=1)
            srcs = a.sources.split(",")
            fs, outs, errs = {"contig": lambda: fn(xc, axis=-1)}, {}, {}
            for k in srcs:
                ln = Launch(dataclasses.replace(plan, source=k), 0)
                fs[k] = lambda ln=ln: ln.cols(x.data.ptr, y.data.ptr, O, L, I, L * I, I, L * I, I)
                y.fill(0)
                fs[k]()
                outs[k] = y.copy()
                errs[k] = float(np.nanmax(np.abs(ref.to_float64(y[:, :, cols]) - r) / np.maximum(1, np.abs(r))))
            b = min_over_rounds(fs, a.rounds)
            same = all(bool(cp.array_equal(outs[srcs[0]], outs[k], equal_nan=True)) for k in srcs)
            tol = 1e-5 if dt == "float32" else 1e-2
            short = plan.kernel.split("<")[0].replace("softmax_cols_", "")
            if len(srcs) == 2:
                o, n = b[srcs[0]], b[srcs[1]]
                print(f"{dt:9s} {(O, L, I)} {short:12s} contig {b['contig']:6.1f} | old {o:6.1f} "
                      f"{o / b['contig']:.2f}x | new {n:6.1f} {n / b['contig']:.2f}x | "
                      f"{o / n:.3f}x faster, err {errs[srcs[0]]:.1e} / {errs[srcs[1]]:.1e}, same {same}"
                      + (" WRONG" if max(errs.values()) > tol else ""), flush=True)
            else:
                shape_of = f"nr{plan.extra[3]} c{plan.extra[1]}" if len(plan.extra) >= 4 else ""
                print(f"{dt:9s} {(O, L, I)} {short:4s} {shape_of} contig {b['contig']:5.1f} | "
                      + " | ".join(f"{k.replace('.cu', '')} {b[k]:5.1f} {b[k] / b['contig']:.2f}x"
                                   + (" WRONG" if errs[k] > tol else "") for k in srcs)
                      + f" | same {same}", flush=True)
            del x, xc, y
            cp.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    main()
