"""A/B of topk_seg's PICK tail (kernels/topk.cu; the dispatcher's
TOPK_SEG_PICK_MAX_K): for each float32 seg shape (tools/prof_seg.py's
SegCase), the dispatcher's kernel against the same name with the PICK flag
flipped (k <= TOPK_SEG_PICK_KMAX only), same launch and data, alternating,
CUDA events with the L2 flushed, median of 60 per round, 3 rounds; both
checked against the float64 reference (indices equal, values to 1e-5).
    PYTHONPATH=.:tools:tests python3 tools/ab_seg_pick.py R,L,k ..."""
import sys
import numpy as np
import cupy as cp
from cusoftmax._loader import expanded_source, COMPILE_OPTIONS
from cusoftmax import _dispatch as D, reference as ref
from prof_seg import SegCase
from tune import timeit

PICK_KMAX = 8  # kernels/topk.cu TOPK_SEG_PICK_KMAX: the PICK tail's largest k


def main():
    shapes = [tuple(int(v) for v in a.split(",")) for a in sys.argv[1:]]
    src = expanded_source("topk.cu")
    for R, L, k in shapes:
        try:
            c = SegCase(R, L, k)
        except AssertionError:
            print(f"{R:>4}x{L:<7} k={k:<3} not seg: skipped", flush=True)
            continue
        pl, a, idx, vals = c.plan, c.args, c.idx, c.vals
        head, f = D.topk_seg_flags(pl.kernel)
        pick = f["pick"]
        names = {"pick" if pick else "plain": pl.kernel}
        if pick or (2 <= k <= PICK_KMAX and not f["two"]):
            names["plain" if pick else "pick"] = D._topk_seg_name(head, f["pipe"], f["ef"], False, not pick)
        fns = {n: cp.RawModule(code=src, options=COMPILE_OPTIONS, name_expressions=[kn]).get_function(kn)
               for n, kn in names.items()}
        res = {n: [] for n in fns}
        outs = {}
        for rnd in range(3):
            for n, fn in fns.items():
                res[n].append(timeit(lambda: fn(pl.grid, pl.block, a), reps=60))
                idx.fill(-5)
                fn(pl.grid, pl.block, a)
                outs[n] = (cp.asnumpy(idx).copy(), cp.asnumpy(vals).copy())
        r = ref.softmax_topk(cp.asnumpy(c.x), k)
        line = f"{R:>4}x{L:<7} k={k:<3} g{pl.grid} lib={'pick' if pick else 'plain'}"
        for n in fns:
            ok = np.array_equal(outs[n][0], r.indices) and np.allclose(outs[n][1], r.values, rtol=1e-5, atol=1e-7)
            line += f" | {n} " + " ".join(f"{t:6.2f}" for t in res[n]) + f" ok {ok}"
        if "pick" in res and "plain" in res:
            line += f" | pick - plain {min(res['pick']) - min(res['plain']):+.2f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
