"""softmax_cols_sync with skewed 16-byte packs (the kernel's SK; issue 2's
1.5x layout rule), experiment: for each (O, L, I) reduced over L whose rows
are off the 16-byte grid (I not a multiple of the pack), time the
dispatcher's plan (``auto``: the public call) and SK plans of the sync kernel
(``sk nr<NR> b<blocks an SM> w<tile bytes>``) against the same data
contiguous (``contig``); ratios are to ``contig``. Every candidate's output
(a strided subset of columns above 2^24 elements) is checked against the
float64 reference after poisoning y; ``--skewed`` also checks the SK plans on
views whose base is off the grid (x and y sliced alike), several slabs.
Min over --rounds rounds (interleaved) of a median of 30, CUDA events, L2
flushed.
    PYTHONPATH=$PWD:$PWD/tools python3 tools/sync_skew_try.py [--log] [--rounds 2] [--shapes 8000x1001,...]
"""
import argparse
import numpy as np, cupy as cp
import cusoftmax as cs
from cusoftmax import _dispatch as D, reference as ref
from cusoftmax._launch import Launch, device_info
from tune import min_over_rounds
from tune_cols import make
from cols_harness import TOL as tol, add_common_args, case, err_of, parse_shapes, timed_calls

SHAPES = [(1, 2000, 1001), (1, 2000, 3001), (1, 1000, 5001), (1, 4000, 1001), (1, 8000, 1001),
          (1, 16384, 255), (1, 4000, 1500), (1, 16384, 1001), (1, 8192, 4095), (1, 30000, 1001),
          (1, 6000, 3001), (1, 12000, 2001), (1, 1000, 1001), (4, 4000, 1001)]
VARIANTS = {4: [(16, 2), (8, 2)], 2: [(16, 2), (8, 2)]}


def plans(O, L, I, dt, log, dev, variants=None, segments=(128, 256)):
    isz = np.dtype(D._np_name(dt)).itemsize
    out = {}
    for nr, mb in variants or VARIANTS[isz]:
        for seg in segments:
            p = D._plan_cols_sync(O, L, I, dt, dt, log, dev, 1, nr=nr, segment=seg, sk=True, minb=mb)
            if p is not None and p.extra[1] <= D.COLS_SYNC_MAX_SPLITS:
                out[f"sk nr{nr} b{mb} w{seg} g{p.grid[0]}"] = p
    return out


def main():
    ap = argparse.ArgumentParser()
    add_common_args(ap)
    ap.add_argument("--skewed", action="store_true")
    ap.add_argument("--variants", default=None, help="NR:blocks an SM,... (default: VARIANTS by itemsize)")
    ap.add_argument("--segments", default="128,256")
    a = ap.parse_args()
    shapes = parse_shapes(a.shapes, SHAPES)
    dev = device_info(0)
    var = [tuple(int(n) for n in v.split(":")) for v in a.variants.split(",")] if a.variants else None
    segs = tuple(int(n) for n in a.segments.split(","))
    fn = cs.log_softmax if a.log else cs.softmax
    rf = ref.log_softmax if a.log else ref.softmax
    print(f"# {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, {'log_softmax' if a.log else 'softmax'}, "
          f"us (x contiguous-time ratio)", flush=True)

    if a.skewed:  # views off the grid: x and y at the same element offset, several slabs
        for dt in a.dtypes.split(","):
            for O, L, I in ((3, 700, 1001), (2, 1500, 333), (1, 4096, 2049), (5, 64, 1003)):
                for off in range(0, 16 // np.dtype(D._np_name(dt)).itemsize):
                    n = O * L * I
                    xb = make((n + 16,), dt)
                    yb = cp.empty_like(xb)
                    x = xb[off:off + n].reshape(O, L, I)
                    y = yb[off:off + n].reshape(O, L, I)
                    r = rf(x, axis=1)
                    bad = []
                    ps = plans(O, L, I, dt, a.log, dev, var, segs)
                    for name, p in ps.items():
                        yb.fill(np.nan)
                        Launch(p, 0).cols(x.data.ptr, y.data.ptr, O, L, I, L * I, I, L * I, I)
                        e = err_of(y, r, slice(None), a.log)
                        # nothing outside y written
                        outside = ref.to_float64(cp.concatenate([yb[:off], yb[off + n:]]))
                        if not e <= tol[dt] or not np.isnan(outside).all():
                            bad.append(f"{name} err {e:.2e}")
                    print(f"skewed {dt} {(O, L, I)} offset {off}: {len(ps)} plans " + ("ok" if not bad else f"WRONG {bad}"),
                          flush=True)
                    del xb, yb, x, y
    for dt in a.dtypes.split(","):
        for O, L, I in shapes:
            x, xc, y, cols, r = case(O, L, I, dt, a.log)
            fs, bad = timed_calls(fn, x, xc, y, cols, r, dt, a.log, plans(O, L, I, dt, a.log, dev, var, segs))
            vec = 16 // x.dtype.itemsize
            while vec > 1 and I % vec:
                vec //= 2
            apl = D.plan_cols(O, L, I, dt, dt, a.log, dev, vec, True, True)
            alabel = apl.kernel.split("<")[0].replace("softmax_cols_", "") + (f" fold{apl.fold}" if apl.fold > 1 else "")
            ts = min_over_rounds(fs, a.rounds)
            c = ts.pop("contig")
            best = min((t, k) for k, t in ts.items() if k != "auto")
            print(f"{dt:9s} {(O, L, I)} contig {c:6.1f} | auto = {alabel} {ts['auto'] / c:.2f}x | best {best[1]} "
                  f"{best[0] / c:.2f}x | " + " | ".join(f"{k} {t / c:.2f}x" for k, t in ts.items() if k != "auto")
                  + (f" WRONG {bad}" if bad else ""), flush=True)
            del x, xc, y
            cp.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    main()
