"""Few long rows of softmax_topk: time the public call (CUDA events, L2
flushed, median of 30; tools/tune.py timeit) for several split thresholds
(TOPK_SPLIT_MIN_ELEMS: the fewest elements a split block streams, and
TOPK_SPLIT_BLOCKS_PER_SM: blocks a row count may use per SM), each result
checked against the float64 reference first. Sets those two thresholds in
cusoftmax/_dispatch.py.
"""
import argparse
import json

import numpy as np
import cupy as cp

import cusoftmax as cs
from cusoftmax import _dispatch as D, _topk
from cusoftmax import reference as ref

from tune import timeit


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    shapes = [(1, 32768, 1), (1, 32768, 50), (1, 128256, 5), (1, 128256, 50), (1, 262144, 50), (8, 32768, 50),
              (8, 128256, 50), (64, 32768, 50), (64, 128256, 50), (64, 128256, 5), (256, 32768, 50)]
    settings = [(4096, 2), (2048, 2), (1024, 2), (1024, 4), (512, 4), (512, 8), (256, 8)]
    res = []
    for R, L, k in shapes:
        x = cp.random.RandomState(R + L + k).standard_normal((R, L), dtype=cp.float32)
        want = ref.softmax_topk(x[:1], k)
        line = []
        for me, bps in settings:
            D.TOPK_SPLIT_MIN_ELEMS, D.TOPK_SPLIT_BLOCKS_PER_SM = me, bps
            _topk._cache.clear()
            p = D.plan_topk(R, L, k, "float32", "float32", D.DeviceInfo(132, 90), "auto")
            got = cs.softmax_topk(x, k)
            ok = np.array_equal(cp.asnumpy(got.indices[:1]), want.indices) and np.allclose(
                cp.asnumpy(got.values[:1]), want.values, rtol=1e-5, atol=1e-9)
            us = timeit(lambda: cs.softmax_topk(x, k))
            line.append((us, me, bps, p.splits, p.block[0], ok))
            res.append(dict(shape=[R, L], k=k, min_elems=me, blocks_per_sm=bps, splits=p.splits,
                            threads=p.block[0], us=us, ok=bool(ok)))
        print(f"{R:>4}x{L:<7} k={k:<3} " + " | ".join(
            f"{me}/{bps}: {us:6.2f}us s{sp} t{th}{'' if ok else ' WRONG'}" for us, me, bps, sp, th, ok in line),
            flush=True)
    if a.json:
        json.dump(res, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
