"""A/B of a kernel-source edit on the dispatched plans: each plan launched
from kernels/_old_<name>.cu (the previous commit's source with its
common.cuh as _old_common.cuh, copied by hand) and from the current source,
alternating, 3 rounds of a median of 30 (CUDA events, L2 flushed before every
repetition: tools/tune.py timeit); outputs compared bit for bit. The old
source must take the same template arguments as the new one (the plan's
kernel name is used for both). kernels/ab_load_row_pack.txt: common.cuh's
load_row_pack with a predicated load instead of an early return (168f125
plus the backward's raw-pack loads), not kept: 0.73-1.38x, the register
kernels' log-softmax forms and the backward cluster kernel slower.

    PYTHONPATH=.:tools python tools/ab_src.py [--what fwd,bwd] [--shapes RxL,...] [--dtypes ...]
"""
import argparse
import dataclasses

import numpy as np
import cupy as cp

from cusoftmax import _dispatch as D
from cusoftmax._launch import Launch, device_info
from cusoftmax._backward import _launch_rows
from tune import timeit
from tune_sync_bwd import make

OLD = {"softmax.cu": "_old_softmax.cu", "softmax_backward.cu": "_old_bwd.cu"}
OLD_FILE = None  # --old: another file of kernels/ as the "old" side


def ab(tag, plan, call, out):
    old = dataclasses.replace(plan, source=OLD_FILE or OLD[plan.source])
    res = {"old": [], "new": []}
    outs = {}
    for name, pl in (("old", old), ("new", plan)):
        ln = Launch(pl, 0)
        res[name + "_f"] = call(ln)
    for _ in range(3):
        for name in ("old", "new"):
            f = res[name + "_f"]
            out.fill(0)
            f()
            outs[name] = cp.asnumpy(out).view(np.uint8).copy()
            res[name].append(timeit(f, 30))
    same = np.array_equal(outs["old"], outs["new"])
    o, n = min(res["old"]), min(res["new"])
    print(f"{tag:44s} old {' '.join(f'{t:8.2f}' for t in res['old'])} | new "
          f"{' '.join(f'{t:8.2f}' for t in res['new'])} | {o / n:5.3f}x same={same} {plan.kernel}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--what", default="fwd,bwd")
    ap.add_argument("--old", default=None, help="file of kernels/ for the old side (default _old_<name>.cu)")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--shapes", default="262144x128,4096x1024,32768x1024,4096x4096,4096x16384,512x32768,"
                                        "4096x32768,512x131072,4096x65536,64x32768,8x131072,1x128256,"
                                        "64x262144,1x1000000")
    a = ap.parse_args()
    global OLD_FILE
    OLD_FILE = a.old
    dev = device_info(0)
    shapes = [tuple(int(v) for v in t.split("x")) for t in a.shapes.split(",")]
    for dt in a.dtypes.split(","):
        for R, L in shapes:
            x = make(R, L, dt)
            out = cp.empty_like(x)
            for log in (False, True):
                if "fwd" in a.what:
                    pl = D.plan_rows(R, L, dt, dt, log, dev)
                    ab(f"fwd {'log' if log else 'sm '} {dt} {R}x{L}", pl,
                       lambda ln: (lambda: ln.rows(x.data.ptr, out.data.ptr, R, L, L, L)), out)
                if "bwd" in a.what:
                    dy = make(R, L, dt, seed=1)
                    pl = D.plan_backward_rows(R, L, dt, dt, dt, log, dev)
                    ab(f"bwd {'log' if log else 'sm '} {dt} {R}x{L}", pl,
                       lambda ln: (lambda: _launch_rows(ln, x.data.ptr, dy.data.ptr, out.data.ptr, R, L, L, L, L)),
                       out)


if __name__ == "__main__":
    main()
