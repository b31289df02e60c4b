"""topk_seg's timeline inside one launch (diagnostic): the kernel compiled with
-DTOPK_SEG_TRACE stamps %globaltimer in thread 0 of each block at entry (0)
and after its streaming (1), and in each row's last block at 2 (elected), 3
(maxima loaded and sorted), 4 (ranked), 5 (candidates collected), 6 (end).
"code warm": the same launch on a copy of x just before (after the flush).
Per launch (L2 flushed before it, 15 launches, medians printed), us after the
earliest block entry: the first / last block entry, the first / last stream
end, and for the tail the latest row's point and the median over rows of
each step; "events" = the launch without hooks (CUDA events, median of 30).
    PYTHONPATH=.:tools:tests python tools/seg_trace.py [R,L,k ...] [-DFLAG ...]"""
import sys

import numpy as np
import cupy as cp

from cusoftmax._loader import expanded_source, COMPILE_OPTIONS
from prof_seg import SegCase
from tune import timeit, FLUSH


def trace(R, L, k, reps=15, warm=False, opts=()):
    c = SegCase(R, L, k)
    pl, a = c.plan, c.args
    fp = cp.RawModule(code=expanded_source("topk.cu"), options=COMPILE_OPTIONS + opts,
                      name_expressions=[pl.kernel]).get_function(pl.kernel)
    base = timeit(lambda: fp(pl.grid, pl.block, a))
    mod = cp.RawModule(code=expanded_source("topk.cu"), options=COMPILE_OPTIONS + ("-DTOPK_SEG_TRACE",) + opts,
                       name_expressions=[pl.kernel])
    f = mod.get_function(pl.kernel)
    tr = cp.ndarray((64, 32, 16), cp.uint64, mod.get_global("seg_trace"))
    S, rows = pl.grid[0], min(R, 64)
    assert S <= 32, pl
    x2 = c.x.copy()
    a2 = (x2.data.ptr,) + a[1:]
    res, subs = [], []
    for _ in range(reps):
        tr.fill(0)
        c.cnt.fill(0)
        FLUSH.fill(1)
        if warm:  # the same launch on a copy of x first: code in L2 and the SMs, x not
            f(pl.grid, pl.block, a2)
            tr.fill(0)
        cp.cuda.runtime.deviceSynchronize()
        f(pl.grid, pl.block, a)
        cp.cuda.runtime.deviceSynchronize()
        t = cp.asnumpy(tr[:rows, :S]).astype(np.int64)  # (rows, S, point)
        t0 = t[:, :, 0].min()
        ent, se = (t[:, :, 0] - t0) / 1e3, (t[:, :, 1] - t0) / 1e3
        last = t[:, :, 2].argmax(axis=1)  # the row's last block (the only one with point 2)
        tail = np.array([np.where(t[r, last[r], 2:7] > 0, (t[r, last[r], 2:7] - t0) / 1e3, np.nan)
                         for r in range(rows)])  # (rows, 5); k = 1 skips 3-5
        steps = np.diff(np.concatenate([se.max(axis=1)[:, None], tail], axis=1), axis=1)  # (rows, 5)
        sub = np.array([(t[r, last[r], [2, 9, 7, 8, 3]] - t0) / 1e3 for r in range(rows)])
        subs.append(np.nanmedian(np.diff(np.where(sub > -1e6, sub, np.nan), axis=1), axis=0))
        res.append([ent.max(), se.min(), se.max()] + list(np.nanmax(tail, axis=0)) + list(np.nanmedian(steps, axis=0)))
    with np.errstate(all="ignore"):
        m = np.nanmedian(np.array(res), axis=0)
    print(f"{R:>3}x{L:<7} k={k:<3} grid={pl.grid} sp={pl.seg_packs}{' code warm' if warm else ''}{' '.join(opts)}: events {base:6.2f} | last entry {m[0]:5.2f}"
          f" | stream end first {m[1]:5.2f} last {m[2]:5.2f} | latest row at 2..6: "
          + " ".join(f"{v:5.2f}" for v in m[3:8])
          + " | median row steps (stream end->2, 2->3, 3->4, 4->5, 5->6): " + " ".join(f"{v:4.2f}" for v in m[8:]),
          flush=True)
    if k > 1:
        with np.errstate(all="ignore"):
            sm = np.nanmedian(np.array(subs), axis=0)
        print("    2->3 by thread 0 of the last block (median row): 2 -> partials merged "
              f"{sm[0]:4.2f} -> keys loaded {sm[1]:4.2f} -> warp sort {sm[2]:4.2f} -> block (m, d) {sm[3]:4.2f}",
              flush=True)


def main():
    opts = tuple(a for a in sys.argv[1:] if a.startswith("-D"))
    shapes = [tuple(int(v) for v in s.split(",")) for s in sys.argv[1:] if not s.startswith("-D")] or [
        (64, 128256, 1), (64, 128256, 5), (64, 128256, 50), (64, 262144, 5), (64, 262144, 50)]
    for R, L, k in shapes:
        trace(R, L, k, opts=opts)
        trace(R, L, k, warm=True, opts=opts)


if __name__ == "__main__":
    main()
