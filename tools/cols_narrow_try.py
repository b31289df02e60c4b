"""Strided-axis (cols) plans for unit-stride axes that do not take 16-byte
packs: the dispatcher's plan against softmax_cols_cl and softmax_cols_sync
built with narrower packs (``v`` elements: 8-, 4- or 2-byte packs, or
scalars; the sync kernel then loads without its cp.async prefetch), each at
the NR values the dispatcher knows, plus the staged and split plans; beside
them the same elements contiguous. Reduction along L of a C-ordered
(O, L, I) array, as tools/layout_table.py. CUDA events, L2 flushed before
every repetition (tools/tune.py timeit, min_over_rounds), min over rounds of a median of 30;
each candidate's output checked against the float64 reference on a few
columns (WRONG beside it otherwise).

Every candidate's kernels are compiled first by a pool of processes (they
fill CuPy's kernel cache; the timing process then loads from it).

    PYTHONPATH=.:tools python tools/cols_narrow_try.py [--log] [--dtypes ...]
        [--shapes OxLxI,...] [--json FILE]
"""
import argparse
import concurrent.futures as cf
import dataclasses
import json
import multiprocessing as mp

import numpy as np
import cupy as cp

from cusoftmax import _dispatch as D, reference as ref
from cusoftmax._launch import Launch, device_info
from cusoftmax._loader import get_kernel
import cusoftmax as cs
from tune import min_over_rounds
from tune_cols import make

SHAPES = [(1, 1000, 1001), (1, 700, 1500), (1, 1000, 1002), (1, 4000, 1001), (1, 333, 3001),
          (1, 2000, 1000), (1, 3000, 1000), (1, 512, 15000), (1, 1000, 1000)]


def widest_vec(I, isz):
    """The widest pack (elements, a power of two) I allows; cupy's base
    pointers are 256-byte aligned."""
    v = 16 // isz
    while v > 1 and I % v:
        v //= 2
    return v


#: Narrow packs hold fewer registers a row: NR up to 64 (the dispatcher's
#: tables carry NR 32; NR 64's blocks an SM from the registers its rows take)
D.COLS_CL_MINB.setdefault(64, 1)
D.COLS_SYNC_MINB.setdefault(64, 2)


def candidates(O, L, I, dt, log, dev, wide_nr=False):
    isz = np.dtype(D._np_name(dt)).itemsize
    vec = widest_vec(I, isz)
    out = [("auto", D.plan_cols(O, L, I, dt, dt, log, dev, vec))]
    vs = sorted({vec, max(1, vec // 2)}, reverse=True)
    for v in vs:
        more = (32, 64) if (wide_nr and v * isz <= 4) else (32,) if (wide_nr and v * isz == 8) else ()
        for nr in D.COLS_CL_NR + more:
            p = D._plan_cols_cl(O, L, I, dt, dt, log, dev, vec, nr=nr, v=v)
            if p is not None:
                out.append((f"cl v{v} nr{nr} c{p.extra[1]}", p))
        for nr in D.COLS_SYNC_NR + more:
            p = D._plan_cols_sync(O, L, I, dt, dt, log, dev, vec, nr=nr, v=v)
            if p is not None:
                out.append((f"sync v{v} nr{nr} s{p.extra[1]}", p))
    T = D.CTYPE[dt]
    st = D._plan_cols_staged(O, L, I, T, T, "true" if log else "false", isz, isz, False, dev, vec)
    if st is not None:
        out.append(("staged", st))
    out.append(("split", D._plan_cols_split(O, L, I, dt, dt, log, dev, vec)))
    return out


def _compile(name):
    get_kernel("softmax.cu", name, 0)
    return name


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", action="store_true")
    ap.add_argument("--dtypes", default="bfloat16,float16,float32")
    ap.add_argument("--shapes", default=None, help="OxLxI,...")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", default=None)
    ap.add_argument("--workers", type=int, default=12)
    ap.add_argument("--wide-nr", action="store_true", help="also NR 32 / 64 for packs of at most 8 bytes")
    a = ap.parse_args()
    shapes = SHAPES if not a.shapes else [tuple(int(n) for n in s.split("x")) for s in a.shapes.split(",")]
    dev = device_info(0)
    cases = [(dt, s, candidates(*s, dt, a.log, dev, a.wide_nr)) for dt in a.dtypes.split(",") for s in shapes]
    names = sorted({k for _, _, cs_ in cases for _, p in cs_ for k in p.kernels()})
    with cf.ProcessPoolExecutor(a.workers, mp_context=mp.get_context("spawn")) as ex:
        list(ex.map(_compile, names))
    fn = cs.log_softmax if a.log else cs.softmax
    rf = ref.log_softmax if a.log else ref.softmax
    print(f"# {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, "
          f"{'log_softmax' if a.log else 'softmax'}, us (min over {a.rounds} rounds of a median of 30), "
          f"{len(names)} kernels", flush=True)
    res = []
    for dt, (O, L, I), cands in cases:
        x = make((O, L, I), dt)
        xc = make((O * I, L), dt)
        y = cp.empty_like(x)
        cols = sorted({0, 1, I // 2, I - 2, I - 1} & set(range(I)))
        r = rf(x[:, :, cols], axis=1)
        fs, errs = {"contig": lambda: fn(xc, axis=-1)}, {}
        for nm, plan in cands:
            ln = Launch(dataclasses.replace(plan), 0)
            fs[nm] = lambda ln=ln: ln.cols(x.data.ptr, y.data.ptr, O, L, I, L * I, I, L * I, I)
            y.fill(np.nan)
            fs[nm]()
            errs[nm] = float(np.nanmax(np.abs(ref.to_float64(y[:, :, cols]) - r) / np.maximum(1, np.abs(r))))
            if bool(cp.isnan(y).any()):
                errs[nm] = float("inf")
        b = min_over_rounds(fs, a.rounds)
        tol = 1e-5 if dt == "float32" else 1e-2
        c = b["contig"]
        auto = cands[0][1].kernel.split("<")[0].replace("softmax_cols_", "")
        best = min((k for k in b if k != "contig"), key=b.get)
        print(f"{dt:9s} {(O, L, I)} contig {c:6.1f}  auto({auto}) {b['auto'] / c:.2f}x  best {best} "
              f"{b[best] / c:.2f}x", flush=True)
        for nm, _ in cands:
            print(f"    {nm:22s} {b[nm]:7.1f} {b[nm] / c:.2f}x" + (" WRONG" if errs[nm] > tol else ""),
                  flush=True)
        res.append({"dtype": dt, "shape": [O, L, I], "contig": c,
                    "cands": {nm: {"us": b[nm], "kernel": p.kernel, "err": errs[nm]} for nm, p in cands}})
        del x, xc, y
        cp.get_default_memory_pool().free_all_blocks()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
