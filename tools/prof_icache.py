"""Is a flushed softmax_topk launch bound by cold instruction fetch?  The
stream kernel of a split plan timed (CUDA events, median of 30) after an L2
flush (cold code, cold data), after a flush plus one launch on another
buffer (warm code, cold data) and after a flush plus a read of x (cold code,
warm data)."""
import sys
import numpy as np
import cupy as cp
import cusoftmax as cs
from cusoftmax import _topk
from tune import FLUSH


def med(setup, fn, reps=30):
    ev = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(reps)]
    for a, b in ev:
        FLUSH.fill(1)
        setup()
        a.record(); fn(); b.record()
    b.synchronize()
    return float(np.median([cp.cuda.get_elapsed_time(a, b) for a, b in ev])) * 1e3


for R, L, k in [(1, 128256, 1), (1, 128256, 50), (64, 128256, 50)]:
    x = cp.random.RandomState(1).standard_normal((R, L), dtype=cp.float32)
    x2 = cp.random.RandomState(2).standard_normal((R, L), dtype=cp.float32)
    cs.softmax_topk(x, k)
    p = next(v for kk, v in _topk._cache.items() if kk[0] == x.shape and kk[3] == k)
    pl = p.plan
    vals = cp.empty((R, k), cp.float32); idx = cp.empty((R, k), cp.int64)
    wsk = cp.empty(R * pl.splits * pl.kp * pl.cand_bytes, np.uint8)
    wsm = cp.empty(2 * R * pl.splits, np.float32)
    def args(xx):
        return (xx.data.ptr, vals.data.ptr, idx.data.ptr, wsk.data.ptr, wsm.data.ptr, R, L, L, k, pl.kp,
                pl.inc, int(pl.block_lists), pl.pps, p.code, 0)
    run = lambda xx: p.fn(pl.grid, pl.block, args(xx), shared_mem=pl.smem)
    margs = (wsk.data.ptr, wsm.data.ptr, vals.data.ptr, idx.data.ptr, R, k, pl.kp, pl.splits, p.code, 0)
    merge = lambda: p.merge_fn(pl.merge_grid, pl.merge_block, margs, shared_mem=pl.merge_smem)
    nothing = lambda: None
    warm_x = lambda: x.sum()
    print(f"{R}x{L} k={k}: stream cold {med(nothing, lambda: run(x)):6.2f} us | code warm "
          f"{med(lambda: run(x2), lambda: run(x)):6.2f} | data warm {med(warm_x, lambda: run(x)):6.2f} | "
          f"both warm {med(lambda: (run(x), x.sum()), lambda: run(x)):6.2f} || merge cold {med(nothing, merge):6.2f} "
          f"| merge code warm {med(merge, merge):6.2f}", flush=True)
