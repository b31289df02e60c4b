"""The strided-axis table of README.md: for each (O, L, I) (reduction along L
of a C-ordered array) and dtype, the time of ``cusoftmax.softmax`` (or
``log_softmax``) over axis 1 against the same elements as contiguous
(O * I, L) rows, and the kernel the dispatcher took. CUDA events, L2 flushed,
median of 30 (tools/tune.py timeit); each strided result is checked against
the float64 reference on a few columns first.
    PYTHONPATH=$PWD:$PWD/tools python3 tools/layout_table.py [--log] [--dtypes ...] [--json F]
        [--shapes 8192x8192,16384x4096] [--set COLS_SYNC_MAX_SPLITS=64 ...]
--shapes: a subset ("LxI" or "OxLxI"); --set: override a cusoftmax._dispatch
threshold for this run (to try a rule before changing it).
"""
import argparse, ast, json
import numpy as np, cupy as cp
import cusoftmax as cs
from cusoftmax import _dispatch as D, reference as ref
from cusoftmax._launch import device_info
from tune import timeit
from tune_cols import make

SHAPES = [(1, 512, 512), (1, 200, 4096), (1, 1000, 1000), (1, 2048, 1024), (1, 512, 16384), (64, 512, 256),
          (1, 2048, 4096), (1, 4096, 2048), (1, 1024, 8192), (8, 4096, 256), (1, 4096, 8192),
          (1, 8192, 1024), (1, 16384, 512), (1, 32768, 256), (1, 65536, 64), (1, 65536, 128),
          (1, 256, 32768), (1, 8192, 8192), (1, 16384, 4096), (4, 262144, 64)]
# rows of the unit-stride axis that do not start on 128-byte lines (I x itemsize
# not a multiple of 128); of these, I x itemsize is not a multiple of 16 either
# for (1, 700, 1500) in 16-bit and for (1, 1000, 1001) in every dtype
SHAPES += [(1, 1000, 600), (1, 2000, 1000), (1, 1000, 3000), (1, 3000, 1000), (1, 5000, 3000),
           (1, 512, 15000), (1, 700, 1500), (1, 1000, 1001)]
# more whose unit-stride axis takes packs narrower than 16 bytes (odd I; I a
# multiple of 2 or, 16-bit, 4 but not of 16 bytes), short and long axes
SHAPES += [(1, 1000, 1002), (1, 333, 3001), (1, 2000, 1001), (1, 2000, 3001), (1, 1000, 5001),
           (1, 4000, 1500), (1, 4000, 1001), (1, 8000, 1001), (1, 16384, 255)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", action="store_true")
    ap.add_argument("--dtypes", default="float32,bfloat16,float16")
    ap.add_argument("--json", default=None)
    ap.add_argument("--shapes", default=None)
    ap.add_argument("--set", action="append", default=[])
    a = ap.parse_args()
    for kv in a.set:
        k, v = kv.split("=")
        assert hasattr(D, k), k
        cur = getattr(D, k)  # (dicts, tuples and bools as Python literals)
        setattr(D, k, ast.literal_eval(v) if isinstance(cur, (dict, tuple, bool)) else type(cur)(v))
    shapes = SHAPES
    if a.shapes:
        want = [tuple(int(n) for n in s.split("x")) for s in a.shapes.split(",")]
        shapes = [(1,) + w if len(w) == 2 else w for w in want]
    dev = device_info(0)
    fn = cs.log_softmax if a.log else cs.softmax
    rf = ref.log_softmax if a.log else ref.softmax
    print(f"# {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, "
          f"{'log_softmax' if a.log else 'softmax'}, us" + "".join(f", {kv}" for kv in a.set), flush=True)
    res = []
    for dt in a.dtypes.split(","):
        for O, L, I in shapes:
            x = make((O, L, I), dt)
            xc = make((O * I, L), dt)
            y = fn(x, axis=1)
            cols = sorted({0, 1, I // 2, I - 2, I - 1} & set(range(I)))
            r = rf(x[:, :, cols], axis=1)  # error relative to max(1, |reference|)
            err = float(np.nanmax(np.abs(ref.to_float64(y[:, :, cols]) - r) / np.maximum(1, np.abs(r))))
            bad = err > (1e-2 if dt != "float32" else 1e-5)
            del y
            t_c = timeit(lambda: fn(xc, axis=-1))
            t_s = timeit(lambda: fn(x, axis=1))
            vec = 16 // x.dtype.itemsize  # (as cusoftmax for fresh arrays: the widest pack I allows)
            while vec > 1 and I % vec:
                vec //= 2
            # (fresh C-ordered: dense slabs; x and y alike off the grid)
            p = D.plan_cols(O, L, I, dt, dt, a.log, dev, vec, True, True)
            k = p.kernel.split("<")[0].replace("softmax_cols_", "")
            if k == "cl" and p.kernel.split(", ")[6] == "16":  # clusters of 16 (COLS_CL16_*)
                k += " c16"
            if p.fold > 1:  # the folded sync kernel (16-byte packs over f rows)
                k += f" fold{p.fold}"
            elif p.kernel.endswith(", true>") and k == "cl":  # skewed packs, their width in elements
                k += f" sk{p.kernel.split(', ')[3]}"
            elif p.kernel.endswith(", false, true>") and k == "sync":  # skewed 16-byte packs (SK)
                k += f" sk{p.kernel.split(', ')[3]}"
            elif vec * x.dtype.itemsize < 16 and p.kernel.startswith(("softmax_cols_cl", "softmax_cols_sync")):
                k += f" v{p.kernel.split(', ')[3]}"  # narrow packs: their width in elements
            print(f"{dt:9s} ({O}, {L}, {I}): contig {t_c:7.1f}  strided {t_s:7.1f}  {t_s / t_c:.2f}x  {k}"
                  + (f"  WRONG err={err:.2e}" if bad else ""), flush=True)
            res.append(dict(dtype=dt, shape=[O, L, I], log=a.log, contig_us=t_c, strided_us=t_s, kernel=k,
                            ok=not bad))
            del x, xc
            cp.get_default_memory_pool().free_all_blocks()
    if a.json:
        json.dump(res, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
