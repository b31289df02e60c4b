"""Strided-axis (cols) plans with skewed packs (softmax_cols_cl's SK form) for
unit-stride axes off the 16-byte grid, against the dispatcher's plan and the
same elements contiguous. Reduction along L of a C-ordered (O, L, I) array,
as tools/layout_table.py. Candidates: SK at full and half packs, NR 4 / 8 /
16 (the clusters _plan_cols_cl picks). Every candidate's whole output is
checked against the row kernels' result on the transposed copy (y poisoned
with NaN first; WRONG beside it otherwise). CUDA events, L2 flushed before
every repetition (tools/tune.py min_over_rounds), min over rounds of a
median of 30.

    PYTHONPATH=.:tools python tools/cols_skew_try.py [--log] [--dtypes ...] [--shapes OxLxI,...] [--offset]

--offset: x and y are views [..., 1:] of (O, L, I + 1) arrays (rows off the
grid by one element more, slabs not dense)."""
import argparse
import concurrent.futures as cf
import dataclasses
import multiprocessing as mp

import numpy as np
import cupy as cp

from cusoftmax import _dispatch as D
from cusoftmax._launch import Launch, device_info
from cusoftmax._loader import get_kernel
import cusoftmax as cs
from tune import min_over_rounds
from tune_cols import make

SHAPES = [(1, 1000, 1001), (1, 333, 3001), (1, 2000, 1001), (1, 2000, 3001), (1, 1000, 5001),
          (1, 4000, 1001), (1, 8000, 1001), (1, 16384, 255), (1, 4000, 1500), (1, 700, 1500)]


def candidates(O, L, I, dt, log, dev, sxl):
    isz = np.dtype(D._np_name(dt)).itemsize
    vec = 16 // isz
    while vec > 1 and (I % vec or sxl % vec):
        vec //= 2
    out = [("auto", D.plan_cols(O, L, I, dt, dt, log, dev, vec, sxl == I))]
    for v in (16 // isz, 8 // isz):
        for seg in (128, 256):
            for nr in (4, 8, 16):
                p = D._plan_cols_cl(O, L, I, dt, dt, log, dev, 1, nr=nr, v=v, sk=True, segment=seg)
                if p is not None and (seg == 128 or p.extra[0] * v * isz == 256):
                    out.append((f"sk v{v} nr{nr} c{p.extra[1]} tx{p.extra[0]} g{p.grid[0] * p.grid[1]}", p))
    return out


def _compile(sn):
    get_kernel(sn[0], sn[1], 0)
    return sn


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", action="store_true")
    ap.add_argument("--dtypes", default="float32,bfloat16,float16")
    ap.add_argument("--shapes", default=None, help="OxLxI,...")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--offset", action="store_true")
    ap.add_argument("--workers", type=int, default=12)
    ap.add_argument("--exp", default="", help="also each SK candidate built from these kernels/ files "
                    "(e.g. copies of softmax.cu defining COLS_CL_SK_EXP)")
    a = ap.parse_args()
    shapes = SHAPES if not a.shapes else [tuple(int(n) for n in s.split("x")) for s in a.shapes.split(",")]
    dev = device_info(0)
    off = 1 if a.offset else 0
    cases = [(dt, s, candidates(*s, dt, a.log, dev, s[2] + off)) for dt in a.dtypes.split(",") for s in shapes]
    for src in filter(None, a.exp.split(",")):
        for _, _, cs_ in cases:
            cs_ += [(f"{nm} {src}", dataclasses.replace(p, source=src)) for nm, p in list(cs_) if nm.startswith("sk")]
    names = sorted({(p.source, k) for _, _, cs_ in cases for _, p in cs_ for k in p.kernels()})
    with cf.ProcessPoolExecutor(a.workers, mp_context=mp.get_context("spawn")) as ex:
        list(ex.map(_compile, names))
    fn = cs.log_softmax if a.log else cs.softmax
    print(f"# {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, "
          f"{'log_softmax' if a.log else 'softmax'}{', offset views' if off else ''}, us (min over {a.rounds} "
          f"rounds of a median of 30), {len(names)} kernels", flush=True)
    for dt, (O, L, I), cands in cases:
        xb = make((O, L, I + off), dt)
        x = xb[:, :, off:]
        yb = cp.empty_like(xb)
        y = yb[:, :, off:]
        xc = cp.ascontiguousarray(x.transpose(0, 2, 1)).reshape(O * I, L)
        want = fn(xc, axis=-1).reshape(O, I, L).transpose(0, 2, 1).astype(cp.float32)
        S = L * (I + off)
        fs, errs = {"contig": lambda: fn(xc, axis=-1)}, {}
        for nm, plan in cands:
            ln = Launch(dataclasses.replace(plan), 0)
            f = plan.fold  # (the folded sync kernel runs the slab as (L / f, I x f))
            fs[nm] = lambda ln=ln, f=f: ln.cols(x.data.ptr, y.data.ptr, O, L // f, I * f, S, (I + off) * f, S,
                                                (I + off) * f)
            yb.fill(np.nan)
            fs[nm]()
            got = y.astype(cp.float32)
            bad = bool(cp.isnan(got).any()) if not bool(cp.isnan(want).any()) else False
            errs[nm] = float("inf") if bad else float(cp.nanmax(cp.abs(got - want) / cp.maximum(1, cp.abs(want))))
        b = min_over_rounds(fs, a.rounds)
        tol = 1e-5 if dt == "float32" else 1e-2
        c = b["contig"]
        auto = cands[0][1].kernel.split("<")[0].replace("softmax_cols_", "")
        best = min((k for k in b if k not in ("contig", "auto")), key=b.get, default="auto")
        print(f"{dt:9s} {(O, L, I)} contig {c:6.1f}  auto({auto}) {b['auto'] / c:.2f}x  best {best} "
              f"{b[best] / c:.2f}x", flush=True)
        for nm, _ in cands:
            print(f"    {nm:40s} {b[nm]:7.1f} {b[nm] / c:.2f}x" + (f" WRONG ({errs[nm]:.2g})" if errs[nm] > tol else ""),
                  flush=True)
        del xb, x, yb, y, xc, want
        cp.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    main()
