"""Diagnostic: how many segments topk_seg's last block re-reads per row (and
how many candidates it takes without a re-read), the kernel compiled with
-DTOPK_SEG_RR_COUNT; kernels/_old_topk.cu (a previous source, copied by hand)
beside kernels/topk.cu where it exists. float32 rows as tools/prof_seg.py.
    PYTHONPATH=.:tools python tools/seg_rereads.py [R,L,k ...]"""
import os
import sys

import cupy as cp

from ab_seg import old_name
from cusoftmax._loader import expanded_source, COMPILE_OPTIONS, kernel_dir
from prof_seg import SegCase

shapes = [tuple(int(v) for v in a.split(",")) for a in sys.argv[1:]] or [
    (64, 128256, 5), (64, 128256, 50), (64, 262144, 5), (64, 262144, 50), (1, 128256, 50), (64, 128256, 16)]
srcs = [s for s in ("_old_topk.cu", "topk.cu") if os.path.exists(os.path.join(kernel_dir(), s))]
for R, L, k in shapes:
    c = SegCase(R, L, k)
    line = f"{R}x{L} k={k}:"
    for src in srcs:
        name = old_name(c.plan.kernel) if src == "_old_topk.cu" else c.plan.kernel
        m = cp.RawModule(code=expanded_source(src), options=COMPILE_OPTIONS + ("-DTOPK_SEG_RR_COUNT",),
                         name_expressions=[name])
        fn = m.get_function(name)
        g = m.get_global("seg_rr")
        rr = cp.ndarray((2 * 65536,), cp.int32, g)
        rr.fill(-1)
        c.cnt.fill(0)
        fn(c.plan.grid, c.plan.block, c.args)
        a = cp.asnumpy(rr[:2 * R]).reshape(R, 2)
        line += f" {src}: reread mean {a[:, 0].mean():.2f} max {a[:, 0].max()} rows>0 {(a[:, 0] > 0).sum()}, direct cands mean {a[:, 1].mean():.1f} |"
    print(line, flush=True)
