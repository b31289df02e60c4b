"""softmax_topk with small k through topk_radix (block lists forced) against
the dispatcher's choice (warp lists / topk_seg), on rows of three orders.
CUDA events, L2 flushed, median of 10, us. Usage: python tools/try_radix_small_k.py"""
import cupy as cp
import cusoftmax as cs
from cusoftmax import _dispatch as D, _topk
from tune import timeit

rs = cp.random.RandomState(1)
orig = (D.TOPK_BLOCK_LIST_KP, D.TOPK_SEG_KP_MAX)
for R, L in ((4096, 131072), (512, 32000), (64, 32768), (8, 128256), (1, 128256)):
    x = rs.standard_normal((R, L), dtype=cp.float32)
    data = {"normal": x, "ascending": cp.sort(x, axis=1)}
    for k in (1, 5, 10, 32, 50, 64, 100):
        line = [f"{R}x{L} k={k:4d}"]
        for name, a in data.items():
            for tag, setting in (("dispatch", orig), ("radix", (1, 0))):
                D.TOPK_BLOCK_LIST_KP, D.TOPK_SEG_KP_MAX = setting
                _topk._cache.clear()
                res = cs.softmax_topk(a, k)
                if tag == "dispatch":
                    base = res
                else:
                    assert bool((res.indices == base.indices).all()), (R, L, k, name)
                t = timeit(lambda: cs.softmax_topk(a, k), reps=10)
                line.append(f"{name} {tag} {t:8.1f}")
        D.TOPK_BLOCK_LIST_KP, D.TOPK_SEG_KP_MAX = orig
        _topk._cache.clear()
        print(" | ".join(line), flush=True)
