"""topk_seg variants on the dispatcher's seg shapes (issue 5): "fixed" (the
unroll of TOPK_SEG_BATCH_ELEMS whatever the segment: TOPK_SEG_FIT_UNROLL
off), "fit" (the unroll halved while a segment fills at most half a batch:
the dispatcher's rule), "fit pipe" (that, with the stream as a software
pipeline: topk_seg's PIPE, the warp's next batch loaded before the current
one is reduced: the dispatcher's choice), and with --b8 "b8" / "pipe b8"
(8-element batches for float compute whatever the segment).

Each variant is the public call's prepared launch (plan, arguments,
workspace) with its kernel swapped for the variant's instantiation; results
are checked against cusoftmax.reference (indices equal, values close), then
timed like the benchmark (CUDA events, L2 flushed, median of 30) in
``--rounds`` alternating rounds, min of the medians. Usage:
    PYTHONPATH=.:tools python tools/seg_unroll_try.py [--rounds 3] [--b8] [R,L,k[,dtype] ...]"""
import argparse

import ml_dtypes
import numpy as np
import cupy as cp

import cusoftmax as cs
from cusoftmax import _dispatch as D, _topk, reference
from cusoftmax._loader import expanded_source, COMPILE_OPTIONS
from tune import min_over_rounds

SHAPES = ["1,8192,5", "8,8192,17", "64,4096,5", "64,8192,17", "128,8192,5", "263,16384,50", "263,32768,17",
          "512,32000,50", "1024,50257,50", "2000,32768,50", "4096,32000,50", "4096,50257,50",
          "1,32000,5,bfloat16", "8,16384,17,bfloat16", "64,8192,5,bfloat16", "512,32000,50,bfloat16",
          "4096,32000,50,bfloat16", "64,128256,5", "263,65536,50"]
BATCH0 = dict(D.TOPK_SEG_BATCH_ELEMS)
# name: (pipe, batch elements for 4-byte compute, TOPK_SEG_FIT_UNROLL)
VARIANTS = {"fixed": (False, BATCH0[4], False), "fit": (False, BATCH0[4], True),
            "fit pipe": (True, BATCH0[4], True)}
B8 = {"b8": (False, 8, False), "pipe b8": (True, 8, False)}
_mods: dict = {}


def variant(x, k, pipe, batch, fit):
    D.TOPK_SEG_BATCH_ELEMS = {**BATCH0, 4: batch}
    fit0, D.TOPK_SEG_FIT_UNROLL = D.TOPK_SEG_FIT_UNROLL, fit
    try:
        _topk._cache.clear()
        cs.softmax_topk(x, k)
        (p,) = _topk._cache.values()
    finally:
        D.TOPK_SEG_BATCH_ELEMS = dict(BATCH0)
        D.TOPK_SEG_FIT_UNROLL = fit0
        _topk._cache.clear()
    assert p.plan.regime == "seg" and p.fast is not None, p.plan
    name = p.plan.kernel.replace(", true>", ">")
    name = name[:-1] + (", true>" if pipe else ">")
    if name not in _mods:
        _mods[name] = cp.RawModule(code=expanded_source("topk.cu"), options=tuple(COMPILE_OPTIONS),
                                   name_expressions=[name])
    fn = _mods[name].get_function(name)
    p.fptr = fn.kernel.ptr  # the module stays loaded in _mods
    return p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--b8", action="store_true", help="also the 8-element batch variants")
    ap.add_argument("shapes", nargs="*")
    a = ap.parse_args()
    dev = cp.cuda.Device()
    print(f"# {cp.cuda.runtime.getDeviceProperties(dev.id)['name'].decode()}, "
          f"{dev.attributes['MultiProcessorCount']} SMs; us, min over {a.rounds} rounds of medians of 30")
    bad = 0
    for sh in a.shapes or SHAPES:
        f = sh.split(",")
        R, L, k = int(f[0]), int(f[1]), int(f[2])
        dt = f[3] if len(f) > 3 else "float32"
        rs = np.random.RandomState(R + L + k)
        xh = rs.standard_normal((R, L)).astype(np.float32)
        if k > 1:
            xh[:, 7] = xh.max(axis=1)  # ties among the leaders
        xh[0, 5] = np.nan if R > 2 else xh[0, 5]  # a NaN row
        x = cp.asarray(xh).astype(ml_dtypes.bfloat16 if dt == "bfloat16" else np.dtype(dt))
        ref = reference.softmax_topk(cp.asnumpy(x), k)
        fns, line = {}, f"{R:>4}x{L:<7} k={k:<3} {dt:<9}"
        for name, (pipe, batch, fit) in {**VARIANTS, **(B8 if a.b8 else {})}.items():
            p = variant(x, k, pipe, batch, fit)
            v, i = p.run_fast(x)
            ok = np.array_equal(cp.asnumpy(i), ref.indices) and np.allclose(
                cp.asnumpy(v).astype(np.float64), ref.values, rtol=1e-5 if dt == "float32" else 1e-2,
                atol=0, equal_nan=True)
            bad += not ok
            line += f" | {name} {p.plan.kernel.split('>')[0].split(', ', 3)[-1]}{'' if ok else ' WRONG'}"
            fns[name] = (lambda p=p: p.run_fast(x))
        ts = min_over_rounds(fns, a.rounds)
        line += " | " + " ".join(f"{n} {t:7.2f}" for n, t in ts.items())
        print(line, flush=True)
    print(f"# wrong: {bad}")


if __name__ == "__main__":
    main()
