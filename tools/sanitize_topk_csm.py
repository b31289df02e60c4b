#!/usr/bin/env python3
"""A small workload of topk_csm for compute-sanitizer (memcheck, racecheck,
synccheck): every cluster size (1, 2, 4, 8 blocks a row), random rows
(candidates ranked directly), rows of tied maxima and ascending rows (the
cluster's radix selection), misaligned rows, k = 1 (the group-maxima
shortcut), k = 5 and 16 (tau from the coarse maxima), 50 and the list
bound; every result checked against the
reference. Exit status 1 if any is wrong.
  compute-sanitizer --tool racecheck python tools/sanitize_topk_csm.py
  compute-sanitizer --tool synccheck --num-cuda-barriers 65536 python tools/sanitize_topk_csm.py
(synccheck 2025.3 without --num-cuda-barriers overflows its table of tracked
barriers on this sample and a later launch fails.)
Environment: TOPK_EF=1 runs the evict-first form (EF) on every array (the
dispatcher gives it only arrays of TOPK_EVICT_FIRST_MIN_BYTES and more, such as
the 132 x 32768 float32 rows of the one-block clusters here)."""
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
if os.environ.get("TOPK_EF") == "1":
    _dispatch.TOPK_EVICT_FIRST_MIN_BYTES = 0
if dev.cc < 90:
    print("topk_csm runs on sm_90 only")
    sys.exit(0)
rng = np.random.default_rng(6)
bad = n = 0
L = 32768
for cs in _dispatch.TOPK_CSM_CLUSTERS:
    R = dev.sm_count // cs if cs < 8 else 4
    a = rng.standard_normal((R, L + 1)).astype(np.float32)
    a[1 % R, rng.choice(L, 900, replace=False)] = 50.0  # tied maxima
    a[2 % R] = np.sort(a[2 % R])
    for dt in (np.float32, ml_dtypes.bfloat16):
        xa = cp.asarray(a.astype(dt))
        for x in (xa[:, :L], xa[:, 1:]):
            for k in (1, 5, 16, 50, 64):
                p = _dispatch.plan_topk(R, L, k, x.dtype.name, x.dtype.name, dev)
                assert p.kernel.startswith("topk_csm<") and p.grid == (cs, R), (cs, p.kernel, p.grid)
                ef = os.environ.get("TOPK_EF") == "1" or _dispatch.topk_evict_first(R, L, x.dtype.name)
                assert p.kernel.endswith(", true>") == ef, p.kernel
                got = cusoftmax.softmax_topk(x, k, log=k == 64)
                ref = reference.softmax_topk(x, k, log=k == 64)
                n += 1
                ok = np.array_equal(got.indices.get(), ref.indices) and np.allclose(
                    got.values.get().astype(np.float64), ref.values, rtol=2e-2, atol=1e-6)
                if not ok:
                    bad += 1
                    print("WRONG", R, L, cs, dt, k)
print(f"{n} cases, {bad} wrong")
sys.exit(1 if bad else 0)
