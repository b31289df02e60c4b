"""Few long rows with k > 64 (the split regime, topk_radix slices + topk_merge):
the call's time against the number of slices a row (TOPK_SPLIT_MIN_ELEMS,
TOPK_SPLIT_BLOCKS_PER_SM varied), with the stream and merge kernels timed
alone. CUDA events, L2 flushed, median of 20, us; indices checked against the
dispatcher's. Usage: python tools/tune_topk_split_kp.py"""
import numpy as np
import cupy as cp
import cusoftmax as cs
from cusoftmax import _dispatch as D, _topk
from cusoftmax._launch import device_info
from tune import timeit

orig = (D.TOPK_SPLIT_MIN_ELEMS, D.TOPK_SPLIT_BLOCKS_PER_SM)
rs = cp.random.RandomState(2)
for R, L, k in ((1, 128256, 100), (1, 128256, 256), (1, 128256, 1024), (8, 128256, 256), (64, 32768, 100),
                (64, 128256, 256), (10, 1000000, 256), (1, 262144, 1024)):
    x = rs.standard_normal((R, L), dtype=cp.float32)
    _topk._cache.clear()
    base = cs.softmax_topk(x, k).indices
    line = [f"{R}x{L} k={k}"]
    for me in (4096, 8192, 16384, 32768, 65536):
        for bps in (1, 2, 4):
            D.TOPK_SPLIT_MIN_ELEMS, D.TOPK_SPLIT_BLOCKS_PER_SM = me, bps
            _topk._cache.clear()
            p = D.plan_topk(R, L, k, "float32", "float32", device_info(0))
            r = cs.softmax_topk(x, k)
            assert bool((r.indices == base).all())
            t = timeit(lambda: cs.softmax_topk(x, k), reps=20)
            line.append(f"me{me // 1024}k b{bps} s{p.splits} t{p.block[0]}: {t:6.1f}")
    D.TOPK_SPLIT_MIN_ELEMS, D.TOPK_SPLIT_BLOCKS_PER_SM = orig
    print(" | ".join(line), flush=True)
