#!/usr/bin/env python3
"""A small workload of topk_radix for compute-sanitizer (memcheck, racecheck,
synccheck): block-regime rows (one block a row) and split rows, random,
ascending (a prune every batch) and tied rows, k at KP edges; every result
checked against the reference. Exit status 1 if any is wrong.
  compute-sanitizer --tool racecheck python tools/sanitize_topk_radix.py"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402
import cupy as cp  # noqa: E402
import ml_dtypes  # noqa: E402
import cusoftmax  # noqa: E402
from cusoftmax import _dispatch, reference  # noqa: E402
from cusoftmax._launch import device_info  # noqa: E402

dev = device_info(cp.cuda.runtime.getDevice())
rng = np.random.default_rng(5)
bad = n = 0
rows_block = _dispatch.topk_thresholds(dev)["split_rows"]
for R, L in ((rows_block, 1500), (3, 20000)):
    a = rng.standard_normal((R, L)).astype(np.float32)
    a[1] = np.sort(a[1])
    a[2] = rng.integers(-3, 4, L)
    for dt in (np.float32, ml_dtypes.bfloat16):
        x = cp.asarray(a.astype(dt))
        for k in (128, 300, 1024):
            p = _dispatch.plan_topk(R, L, k, x.dtype.name, x.dtype.name, dev)
            assert p.kernel.startswith("topk_radix<"), p.kernel
            got = cusoftmax.softmax_topk(x, k)
            ref = reference.softmax_topk(x, k)
            n += 1
            if not np.array_equal(got.indices.get(), ref.indices):
                bad += 1
                print("WRONG", R, L, dt, k, p.regime)
print(f"{n} cases, {bad} wrong")
sys.exit(1 if bad else 0)
