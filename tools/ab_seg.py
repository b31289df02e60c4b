"""A/B of topk_seg: kernels/_old_topk.cu (the previous commit's source, copied
by hand; its kernel named without the TWO flag) against kernels/topk.cu, same launch, alternating, CUDA events with
the L2 flushed, median of 60 per round, 3 rounds.
    PYTHONPATH=.:tools python tools/ab_seg.py R,L,k ..."""
import sys

import numpy as np
import cupy as cp

from cusoftmax import _dispatch as D
from cusoftmax._loader import expanded_source, COMPILE_OPTIONS
from prof_seg import SegCase
from tune import timeit


def old_name(name):
    """The kernel's name without the TWO / PICK flags (a source from before them)."""
    head, f = D.topk_seg_flags(name)
    return D._topk_seg_name(head, f["pipe"], f["ef"])


def main():
    shapes = [tuple(int(v) for v in a.split(",")) for a in sys.argv[1:]]
    srcs = {"old": expanded_source("_old_topk.cu"), "new": expanded_source("topk.cu")}
    mods = {}
    for R, L, k in shapes:
        c = SegCase(R, L, k)
        pl, a, idx, vals = c.plan, c.args, c.idx, c.vals
        res = {"old": [], "new": []}
        outs = {}
        for rnd in range(3):
            for name in ("old", "new"):
                kname = pl.kernel if name == "new" else old_name(pl.kernel)
                mk = (name, kname)
                if mk not in mods:
                    mods[mk] = cp.RawModule(code=srcs[name], options=COMPILE_OPTIONS, name_expressions=[kname])
                fn = mods[mk].get_function(kname)
                res[name].append(timeit(lambda: fn(pl.grid, pl.block, a), reps=60))
                outs[name] = (cp.asnumpy(idx).copy(), cp.asnumpy(vals).copy())
        same = np.array_equal(outs["old"][0], outs["new"][0]) and np.array_equal(outs["old"][1], outs["new"][1])
        print(f"{R:>4}x{L:<7} k={k:<3} old " + " ".join(f"{t:6.2f}" for t in res["old"]) +
              " | new " + " ".join(f"{t:6.2f}" for t in res["new"]) + f" | same output: {same}", flush=True)


if __name__ == "__main__":
    main()
