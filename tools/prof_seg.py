"""Where the time of the one-launch few-rows top-k (topk_seg) goes: the kernel
compiled to end after phase n (-DTOPK_SEG_STOP=n: 1 streaming, 2 + block
(m, d) and the last-block election, 3 + (m, d) merge, maxima loaded and
chunk-sorted, 4 + ranks, 5 + candidates collected; full), each timed like the
benchmark (CUDA events, L2 flushed, median of 30); "variants": the full
kernel under each -D set instead (indices checked equal, 3 alternating
rounds, min of the medians). Usage:
    PYTHONPATH=.:tools python tools/prof_seg.py [variants -DNAME=V ...] [threads] [R,L,k ...]
(SEG_SRC=name.cu times another source in kernels/.)"""
import os
import sys

import numpy as np
import cupy as cp

import cusoftmax as cs
from cusoftmax import _dispatch as D, _topk
from cusoftmax._loader import expanded_source, COMPILE_OPTIONS
from tune import timeit


class SegCase:
    """One seg-regime launch of float32 rows: the plan, its arguments and
    buffers (x, vals, idx, workspaces, the per-row counters)."""

    def __init__(self, R, L, k):
        self.x = x = cp.random.RandomState(R + L + k).standard_normal((R, L), dtype=cp.float32)
        _topk._cache.clear()
        cs.softmax_topk(x, k)
        p = next(v for kk, v in _topk._cache.items() if kk[0] == x.shape and kk[3] == k)
        self.plan = pl = p.plan
        assert pl.regime == "seg", pl
        self.vals = cp.empty((R, k), cp.float32)
        self.idx = cp.empty((R, k), cp.int64)
        wmax = D.TOPK_SEG_WCAP
        self.wsk = cp.empty(2 * R * wmax * 8, np.uint8)  # maxima, then second candidates
        self.wsv = cp.empty(R * (wmax + 2 * pl.splits), np.float32)
        self.cnt = cp.zeros(max(1024, R), np.uint32)  # a counter a row
        self.args = (x.data.ptr, self.vals.data.ptr, self.idx.data.ptr, self.wsk.data.ptr, self.wsv.data.ptr,
                     self.wsv.data.ptr + R * wmax * 4, self.cnt.data.ptr, L, L, k, pl.kp, pl.seg_packs,
                     pl.seg_per_block, p.code, 0)



def main():
    args = sys.argv[1:]
    variants = [()]
    if args and args[0] == "variants":  # the full kernel under each -D set
        args.pop(0)
        variants = [()]
        while args and args[0].startswith("-D"):  # each -D flag one variant
            variants.append((args.pop(0),))
    if args and "," not in args[0]:
        D.TOPK_SEG_THREADS = int(args.pop(0))
    shapes = [tuple(int(v) for v in a.split(",")) for a in args] or [
        (1, 32768, 1), (1, 32768, 50), (1, 128256, 1), (1, 128256, 50), (8, 128256, 50),
        (64, 32768, 50), (64, 128256, 50), (64, 262144, 50), (263, 65536, 50)]
    src = expanded_source(os.environ.get("SEG_SRC", "topk.cu"))  # SEG_SRC: another kernels/ file (A/B)
    mods = {}
    for R, L, k in shapes:
        c = SegCase(R, L, k)
        pl, a, cnt = c.plan, c.args, c.cnt
        line = f"{R:>4}x{L:<7} k={k:<3} grid={pl.grid} block={pl.block} sp={pl.seg_packs}:"
        runs = [(stop, ()) for stop in (1, 2, 3, 4, 5, 0)] if len(variants) == 1 else \
            [(0, v) for v in variants]
        fns = {}
        for stop, opts in runs:
            mk = (stop, opts, pl.kernel)
            if mk not in mods:
                mods[mk] = cp.RawModule(code=src, options=COMPILE_OPTIONS + (f"-DTOPK_SEG_STOP={stop}",) + opts,
                                        name_expressions=[pl.kernel])
            fns[stop, opts] = mods[mk].get_function(pl.kernel)
        ref = None
        for (stop, opts), fn in fns.items():  # variants: every full kernel's indices equal the first's
            if stop == 0:
                cnt.fill(0)
                c.idx.fill(-1)
                fn(pl.grid, pl.block, a)
                got = cp.asnumpy(c.idx)
                ref = got if ref is None else ref
                if not np.array_equal(got, ref):
                    line += f" WRONG{' '.join(opts)}"
        ts = {key: [] for key in fns}
        for _ in range(1 if len(variants) == 1 else 3):  # variants: 3 rounds alternating, min of medians
            for (stop, opts), fn in fns.items():
                cnt.fill(0)  # stop 2 leaves them counting; later stops reset them
                ts[stop, opts].append(timeit(lambda: fn(pl.grid, pl.block, a)))
        for (stop, opts), t in ts.items():
            line += f" {stop or 'full'}{' '.join(opts)} {min(t):6.2f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
