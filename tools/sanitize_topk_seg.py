#!/usr/bin/env python3
"""A small workload of topk_seg's pipelined stream (PIPE: the dispatcher's
plans for segments of at most half a warp's batch) for compute-sanitizer
(memcheck, racecheck, synccheck): unrolls 1 and 2 (float32), 1 (bfloat16,
float64), one and several segments a warp, aligned and misaligned rows,
rows of tied maxima and ascending rows, a NaN row and an all -inf row,
k = 1 (the maxima shortcut), ranked candidates and the compaction; every
result checked against the reference. Exit status 1 if any is wrong.
  compute-sanitizer --tool memcheck python tools/sanitize_topk_seg.py
Environment: SEG_LINEINFO=1 compiles with -lineinfo (source lines in the
reports); SEG_PIPE=0 / SEG_FIT=0 turn the dispatcher's pipeline / fitted
unroll off (the same workload on the other plans); TOPK_EF=1 / 0 runs every
array in the evict-first (EF) / plain load form (default: the dispatcher's
choice by size)."""
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

if os.environ.get("SEG_LINEINFO") == "1":
    from cusoftmax import _loader
    _loader.COMPILE_OPTIONS = tuple(_loader.COMPILE_OPTIONS) + ("-lineinfo",)
_dispatch.TOPK_SEG_PIPE = os.environ.get("SEG_PIPE", "1") == "1"
_dispatch.TOPK_SEG_FIT_UNROLL = os.environ.get("SEG_FIT", "1") == "1"
dev = device_info(cp.cuda.runtime.getDevice())
_dispatch.TOPK_CSM_KP_MAX = 0  # rows the csm regime would take on sm_90 run seg here
if os.environ.get("TOPK_EF") == "1":
    _dispatch.TOPK_EVICT_FIRST_MIN_BYTES = 0
elif os.environ.get("TOPK_EF") == "0":
    _dispatch.TOPK_EVICT_FIRST_MAX_BYTES = -1
rng = np.random.default_rng(7)
bad = n = 0
# (rows, columns, k values): segments of 32 packs on few rows, 64 on many
for R, L, ks in ((16, 8192, (1, 5, 17)), (300, 32000, (33, 50))):
    a = rng.standard_normal((R, L + 1)).astype(np.float64)
    a[1, rng.choice(L, 600, replace=False)] = 50.0  # tied maxima: compaction
    a[2] = np.sort(a[2])
    a[3, 77] = np.nan
    a[4] = -np.inf
    for dt in (np.float32, ml_dtypes.bfloat16, np.float64):
        xa = cp.asarray(a.astype(dt))
        for x in (xa[:, :L], xa[:, 1:]):
            for k in ks:
                name = np.dtype(dt).name
                p = _dispatch.plan_topk(R, L, k, name, name, dev)
                seg = p.kernel.startswith("topk_seg<")
                pipe = seg and _dispatch.topk_seg_flags(p.kernel)[1]["pipe"]
                if not seg or (_dispatch.TOPK_SEG_PIPE and _dispatch.TOPK_SEG_FIT_UNROLL and not pipe):
                    continue  # not a pipelined plan (e.g. float64's whole-batch many-row segments)
                got = cusoftmax.softmax_topk(x, k, log=k == 5)
                ref = reference.softmax_topk(x, k, log=k == 5)
                n += 1
                ok = np.array_equal(got.indices.get(), ref.indices) and np.allclose(
                    got.values.get().astype(np.float64), ref.values, rtol=2e-2, atol=1e-6, equal_nan=True)
                if not ok:
                    bad += 1
                    print("WRONG", R, L, name, k, p.kernel)
print(f"{n} cases, {bad} wrong")
sys.exit(1 if bad or n < 20 else 0)
