"""softmax_cols_cl (one launch, a cluster a tile, partials by st.async)
against the dispatcher's current strided-axis plan and the same data
contiguous: for each (O, L, I) (reduction along L of a C-ordered array) and
dtype, the time of ``cusoftmax.softmax`` on the contiguous (O * I, L) rows,
of the dispatcher's plan, and of softmax_cols_cl launched directly at every
NR that gives a cluster of at most 8 blocks (each checked against the float64
reference under the test suite's tolerance table, tests/_check.py). CUDA
events, L2 flushed, median of 30, us. "tx": the small shapes only, also with
tiles of 64 and 32 bytes (4 and 2 lanes of 16-byte packs a row).
    PYTHONPATH=.:tools:tests python tools/cols_cl_try.py [tx]"""
import sys

import numpy as np
import cupy as cp

import cusoftmax as cs
from cusoftmax import _dispatch as D
from cusoftmax._launch import device_info
from cusoftmax._loader import expanded_source, COMPILE_OPTIONS
from tune import timeit
from tune_cols import make
from _check import check_forward  # tests/_check.py: the float64 reference and the tolerance table

SHAPES = [(1, 512, 512), (1, 1000, 1000), (1, 200, 4096), (1, 2048, 1024), (1, 2048, 4096), (1, 4096, 2048),
          (1, 1024, 8192), (1, 512, 16384), (64, 512, 256), (8, 4096, 256), (1, 4096, 8192)]
MINB = {4: 3, 8: 2, 16: 1}
TX_SWEEP = "tx" in sys.argv[1:]  # also narrower tiles (64 / 32 bytes): 4 / 2 lanes of 16-byte packs
_mods = {}


def fn_of(name, opts=()):
    if (name, opts) not in _mods:
        _mods[name, opts] = cp.RawModule(code=expanded_source("softmax.cu"), options=COMPILE_OPTIONS + opts,
                                         name_expressions=[name]).get_function(name)
    return _mods[name, opts]


def main():
    dev = device_info(0)
    shapes = SHAPES[:4] if TX_SWEEP else SHAPES
    for dt in ("float32", "bfloat16", "float16"):
        for O, L, I in shapes:
            x = make((O, L, I), dt)
            y = cp.empty_like(x)
            xc = make((O * I, L), dt)
            t_contig = timeit(lambda: cs.softmax(xc, axis=-1))
            t_disp = timeit(lambda: cs.softmax(x, axis=1))
            xh = cp.asnumpy(x)
            vec = 16 // x.itemsize
            cur = D.plan_cols(O, L, I, dt, dt, False, dev, vec)
            line = (f"{dt:9} ({O}, {L}, {I}): contig {t_contig:6.1f} | dispatch {cur.kernel.split('<')[0]} "
                    f"{t_disp:6.1f} ({t_disp / t_contig:.2f}x)")
            T = D.CTYPE[dt]
            for tx, nr in [(8, 4), (8, 8), (8, 16)] + ([(4, 4), (4, 8), (2, 4), (2, 8)] if TX_SWEEP else []):
                W = tx * vec
                tiles = O * -(-I // W)
                cl = -(-L // (256 // tx * nr))
                if cl > 8:
                    continue
                cl = {1: 1, 2: 2, 3: 4, 4: 4}.get(cl, 8)
                name = f"softmax_cols_cl<{T}, {T}, false, {vec}, 256, {nr}, {cl}, {MINB[nr]}>"
                f = fn_of(name)
                args = (x, y, np.int64(O), np.int64(L), np.int64(I), np.int64(L * I), np.int64(I),
                        np.int64(L * I), np.int64(I), np.int32(tx))
                y.fill(0)
                f((cl, tiles), (256,), args)
                try:
                    check_forward(y, xh, axis=1)
                    ok = True
                except AssertionError:
                    ok = False
                us = timeit(lambda: f((cl, tiles), (256,), args))
                line += (f" | cl {'' if tx == 8 else f'tx{tx} '}nr{nr} c{cl} {us:6.1f} ({us / t_contig:.2f}x)"
                         f"{'' if ok else ' WRONG'}")
            print(line, flush=True)


if __name__ == "__main__":
    main()
