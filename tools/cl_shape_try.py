"""softmax_cols_cl plans other than the dispatcher's on small strided arrays:
tile segment (bytes of a row a tile spans) x NR (packs a thread), each
forced through _plan_cols_cl and timed from each --sources file (CUDA events,
L2 flushed, min over 3 rounds of a median of 30), checked against the
float64 reference on a few columns ("WRONG" past 1e-5 / 1e-2 relative).

    PYTHONPATH=.:tools python tools/cl_shape_try.py [--shapes OxLxI,...] [--dtypes ...] [--log]
        [--cands SEGxNR[xTHREADS[xMINB]],...] [--sources softmax.cu,...]

THREADS: block size (default 256); MINB: __launch_bounds__ blocks an SM
(default the dispatcher's for NR, else 4).
"""
import argparse
import dataclasses

import numpy as np
import cupy as cp

import cusoftmax as cs
from cusoftmax import _dispatch as D, reference as ref
from cusoftmax._launch import Launch, device_info
from tune import timeit
from tune_cols import make


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="1x1000x1000,1x2048x1024")
    ap.add_argument("--dtypes", default="float32,bfloat16,float16")
    ap.add_argument("--log", action="store_true")
    ap.add_argument("--cands", default="128x4,128x2x512x2,128x1x1024x1,128x2x512x1")
    ap.add_argument("--sources", default="softmax.cu")
    a = ap.parse_args()
    global MINB0
    MINB0 = dict(D.COLS_CL_MINB)
    dev = device_info(0)
    fn = cs.log_softmax if a.log else cs.softmax
    rf = ref.log_softmax if a.log else ref.softmax
    print(f"# {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, "
          f"{'log_softmax' if a.log else 'softmax'}, us", flush=True)
    for dt in a.dtypes.split(","):
        for s in a.shapes.split(","):
            O, L, I = (int(n) for n in s.split("x"))
            x, xc = make((O, L, I), dt), make((O * I, L), dt)
            y = cp.empty_like(x)
            cols = sorted({0, 1, I // 2, I - 2, I - 1} & set(range(I)))
            r = rf(x[:, :, cols], axis=1)
            tol = 1e-5 if dt == "float32" else 1e-2
            fs, errs = {"contig": lambda: fn(xc, axis=-1)}, {}
            for c in a.cands.split(","):
                seg, nr, th, mb = ([int(n) for n in c.split("x")] + [256, 0])[:4]
                D.COLS_CL_THREADS = th
                D.COLS_CL_MINB = dict(MINB0)
                D.COLS_CL_MINB[nr] = mb or MINB0.get(nr, 4)
                p = D._plan_cols_cl(O, L, I, dt, dt, a.log, dev, 16 // x.dtype.itemsize, nr, segment=seg)
                D.COLS_CL_THREADS, D.COLS_CL_MINB = 256, MINB0
                if p is None:
                    continue
                for src in a.sources.split(","):
                    k = f"s{seg}nr{nr}t{th}m{p.kernel.split(', ')[-2]}c{p.extra[1]}g{p.grid[0] * p.grid[1]}" + (
                        "" if src == "softmax.cu" else "/" + src.replace(".cu", ""))
                    try:
                        ln = Launch(dataclasses.replace(p, source=src), 0)
                    except Exception as e:  # e.g. NR not a multiple of 4 in the old reduction
                        print(f"  {k}: {type(e).__name__}", flush=True)
                        continue
                    f = lambda ln=ln: ln.cols(x.data.ptr, y.data.ptr, O, L, I, L * I, I, L * I, I)
                    y.fill(0)
                    f()
                    errs[k] = float(np.nanmax(np.abs(ref.to_float64(y[:, :, cols]) - r) / np.maximum(1, np.abs(r))))
                    fs[k] = f
            ts = {k: [] for k in fs}
            for _ in range(3):
                for k, f in fs.items():
                    ts[k].append(timeit(f))
            b = {k: min(v) for k, v in ts.items()}
            print(f"{dt:9s} {(O, L, I)} contig {b['contig']:5.1f}: " + " | ".join(
                f"{k} {t:5.1f} {t / b['contig']:.2f}x" + (" WRONG" if errs[k] > tol else "")
                for k, t in b.items() if k != "contig"), flush=True)
            del x, xc, y
            cp.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    main()
