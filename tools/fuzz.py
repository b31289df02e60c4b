#!/usr/bin/env python3
"""Seeded differential fuzzer: every public operation against ``cusoftmax.reference``.

    python tools/fuzz.py --cases 10000 --seed 1          # a run
    python tools/fuzz.py --seed 1 --case 4711            # replay one case
    python tools/fuzz.py --cases 200 --ops softmax,softmax_topk --verbose

Case ``i`` of seed ``s`` is drawn from ``numpy.random.default_rng([s, i])``
alone, so any failure replays with ``--seed s --case i``. Cases cover: every
available operation (softmax, log_softmax, softmax_backward,
log_softmax_backward, softmax_topk with and without log), float16 / bfloat16 /
float32 / float64 inputs and mixed result dtypes, row lengths and row counts
weighted to the dispatcher's boundaries (found by scanning
``cusoftmax._dispatch``, +-1), 1- to 4-d shapes, int / negative / tuple / None
axes, C, Fortran, transposed, permuted, sliced, stepped, reversed and
odd-offset views, special values (-inf, +inf, NaN, huge, all-equal rows),
``out=`` fresh, as a view of a larger buffer, or in place, the paper's
algorithms, and plans for other GPUs (an sm_80; a 2-SM GPU, whose tiny grids
loop). Output: the case count, the seed, the failures (each with its replay
command) and the time; exit status 1 on any failure.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))

import numpy as np  # noqa: E402

#: out= sentinel of the backward cases: exact in float16, bfloat16, float32 and float64
BWD_SENTINEL = -31744.0

from _check import (LAYOUTS, SENTINEL, SPECIALS, apply_view, assert_no_sentinel,  # noqa: E402
                    assert_untouched, base_shape_for, covered_mask, fake_device, finalize_ops, host,
                    layout_ops, random_values, real_device_info, row_counts, row_lengths)
from _ops import ALL_OPS  # noqa: E402
from _util import DTYPES, np_dtype  # noqa: E402

SMALL = (1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 31, 32, 33, 64, 65, 100, 127, 128, 129, 255, 256, 257)


def draw_case(rng, ops, real, max_elems):
    """A JSON-able case description drawn from ``rng``."""
    op = ops[int(rng.choice(len(ops), p=_op_weights(ops)))]
    c = {"op": op.name}
    u = rng.random()
    c["device"] = "sm80" if u < 0.06 else ("tiny" if u < 0.12 else "real")
    dev = _dev(c["device"], real)
    c["dtype"] = str(rng.choice(DTYPES))
    c["out_dtype"] = None
    # mixed dtypes and other GPUs' plans: fewer cases, as each pair or plan
    # compiles kernels of its own (compiling dominates a run's time)
    if op.family != "backward" and rng.random() < 0.12:
        c["out_dtype"] = str(rng.choice(DTYPES))
    if op.family == "backward" and rng.random() < 0.12:
        c["dy_dtype"] = str(rng.choice(DTYPES))
    cap = max_elems * (8 if rng.random() < 0.05 else 1)
    # reduced length: a dispatcher boundary +-1 or small / random
    if rng.random() < 0.45:
        lens = row_lengths(c["dtype"], c["out_dtype"], dev, max_len=cap)
        L = int(rng.choice(lens))
    elif rng.random() < 0.7:
        L = int(rng.choice(SMALL))
    else:
        L = int(rng.integers(1, min(cap, 20000) + 1))
    rest = max(1, cap // L)
    if rng.random() < 0.35:
        cnts = [r for r in row_counts(dev) if r <= rest] or [1]
        R = int(rng.choice(cnts))
    else:
        R = int(rng.integers(1, min(rest, 64) + 1))
    # shape: the reduced length on one axis (or split over two), rows spread
    ndim = int(rng.choice([1, 2, 2, 2, 3, 4]))
    if ndim == 1:
        shape, red = [L], [0]
        R = 1
    else:
        keep_n = ndim - 1
        red_two = ndim >= 3 and rng.random() < 0.3 and op.family != "topk"
        if red_two:
            keep_n = ndim - 2
        keep = _split(rng, R, keep_n)
        reds = _split(rng, L, 2) if red_two else [L]
        axes_pos = sorted(rng.choice(ndim, size=len(reds), replace=False).tolist())
        shape, ki, ri = [], 0, 0
        for d in range(ndim):
            if d in axes_pos:
                shape.append(reds[ri])
                ri += 1
            else:
                shape.append(keep[ki])
                ki += 1
        red = axes_pos
    ndim = len(shape)
    if rng.random() < 0.1 and op.family != "topk" or (op.family == "topk" and rng.random() < 0.05):
        axis = None if op.family == "topk" or len(red) == ndim or rng.random() < 0.5 else red
        if axis is None and math.prod(shape) > cap:
            axis = red
    else:
        axis = red
    if isinstance(axis, list):
        if len(axis) == 1:
            a = axis[0]
            axis = a - ndim if rng.random() < 0.5 else a
        else:
            axis = tuple(a - ndim if rng.random() < 0.5 else a for a in axis)
    c["shape"], c["axis"] = [int(s) for s in shape], axis
    lay = str(rng.choice(LAYOUTS))
    ops_ = layout_ops(lay, ndim, lambda lo, hi: int(rng.integers(lo, hi + 1)))
    c["layout"], c["view"] = lay, _jsonable(finalize_ops(ops_, tuple(shape)))
    c["special"] = str(rng.choice(SPECIALS[1:])) if rng.random() < 0.3 else "normal"
    if op.family == "backward":
        c["special"] = "normal"
    c["algorithm"] = "auto"
    if op.family == "forward" and rng.random() < 0.15:
        c["algorithm"] = str(rng.choice(["naive", "safe", "online"]))
    if op.family == "topk" and rng.random() < 0.15:
        c["algorithm"] = str(rng.choice(["online", "safe", "unfused"]))
    c["out"] = None
    if op.family == "forward":
        c["out"] = [None, None, "fresh", "view", "inplace"][int(rng.integers(5))]
    elif op.family == "backward":
        c["out"] = [None, None, "fresh", "inplace_dy"][int(rng.integers(4))]
    if op.family == "topk":
        n = math.prod(shape) if axis is None else shape[axis]
        c["k"] = int(rng.choice([0, 1, 2, 5, min(n, 64), n - 1, n]) if n > 1 else n)
        c["k"] = max(0, min(c["k"], n))
    c["seed"] = int(rng.integers(2 ** 31))
    return c


def _op_weights(ops):
    w = np.array([3.0 if o.family == "forward" else 1.5 for o in ops])
    return w / w.sum()


def _split(rng, n, parts):
    """n as a product of ``parts`` factors (roughly), each >= 1."""
    out = []
    for _ in range(parts - 1):
        divs = [d for d in range(1, min(n, 64) + 1) if n % d == 0]
        d = int(rng.choice(divs))
        out.append(d)
        n //= d
    out.append(n)
    rng.shuffle(out)
    return [int(v) for v in out]


def _jsonable(ops):
    return [[o[0]] + [list(v) if isinstance(v, tuple) else v for v in o[1:]] for o in ops]


def _view_ops(c):
    out = []
    for o in c["view"]:
        if o[0] == "perm":
            out.append(("perm", tuple(o[1])))
        elif o[0] == "flat":
            out.append(("flat", o[1], tuple(o[2])))
        else:
            out.append(tuple(o))
    return out


def _dev(name, real):
    from cusoftmax._dispatch import DeviceInfo
    if name == "sm80":
        return DeviceInfo(real.sm_count, 80)
    if name == "tiny":
        return DeviceInfo(2, real.cc)
    return real


def run_case(c, ops_by_name, real):
    import cupy

    op = ops_by_name[c["op"]]
    rng = np.random.default_rng(c["seed"])
    shape, axis = tuple(c["shape"]), c["axis"]
    if isinstance(axis, list):
        axis = tuple(axis)
    vops = _view_ops(c)
    bshape = base_shape_for(shape, vops)
    # host bases; the view of each carries the case's values
    if op.family == "backward":
        h = op.make_inputs(rng, shape, c["dtype"], axis, dy_dtype=c.get("dy_dtype"))
    elif c["algorithm"] == "naive":
        L = math.prod(shape) if axis is None else math.prod(
            shape[a] for a in ((axis,) if isinstance(axis, int) else axis))
        hi = min(79.0, 87.0 - math.log(max(L, 1)) - 1.0)
        h = {"x": rng.uniform(-hi, hi, size=shape).astype(np_dtype(c["dtype"]))}
    else:
        h = op.make_inputs(rng, shape, c["dtype"], axis, c["special"])
    bases = {}
    for k, v in h.items():
        b = random_values(rng, bshape, np.dtype(v.dtype).name if v.dtype.name != "bfloat16" else "bfloat16")
        apply_view(b, vops)[...] = v
        bases[k] = b
    gb = {k: cupy.asarray(b) for k, b in bases.items()}
    g = {k: apply_view(b, vops) for k, b in gb.items()}
    hv = {k: apply_view(b, vops).copy() for k, b in bases.items()}
    kw = {}
    if c["out_dtype"]:
        kw["dtype"] = np_dtype(c["out_dtype"])
    if c["algorithm"] != "auto":
        kw["algorithm"] = c["algorithm"]
    out = ob = None
    S = None
    if op.family == "forward":
        from cusoftmax._arrays import float_dtype_for
        odt = np_dtype(c["out_dtype"]) if c["out_dtype"] else float_dtype_for(np.dtype(h["x"].dtype))
        S = SENTINEL[op.log]
        if c["out"] == "fresh":
            out = cupy.asarray(np.full(shape, S, dtype=odt))
        elif c["out"] == "view":
            ob = cupy.asarray(np.full(bshape, S, dtype=odt))
            out = apply_view(ob, vops)
        elif c["out"] == "inplace" and odt == g["x"].dtype:
            out = g["x"]
    elif op.family == "backward":
        from cusoftmax._backward import result_dtype
        odt = result_dtype(g["y"].dtype, g["dy"].dtype)
        # a gradient can take any value: the sentinel is one no case here
        # produces (exact in every output dtype; 7.5 was a legitimate
        # bfloat16 gradient in seed 3 case 1948)
        S = BWD_SENTINEL
        if c["out"] == "fresh":
            out = cupy.asarray(np.full(shape, S, dtype=odt))
        elif c["out"] == "inplace_dy" and odt == g["dy"].dtype:
            out = g["dy"]
    if out is not None:
        kw["out"] = out
    with _maybe_fake(c["device"], real):
        if op.family == "topk":
            res = op.call(g, axis, k=c["k"], **kw)
        else:
            res = op.call(g, axis, **kw)
    cupy.cuda.get_current_stream().synchronize()
    if out is not None and op.family != "topk":
        assert res is out, "the result is not out"
    if op.family == "topk":
        op.check(res, hv, axis, ctx="", k=c["k"], out_dtype=c["out_dtype"])
    elif op.family == "forward":
        op.check(res, hv, axis, out_dtype=c["out_dtype"], naive=c["algorithm"] == "naive")
    else:
        op.check(res, hv, axis)
    if out is not None and out is not g.get("x") and out is not g.get("dy"):
        assert_no_sentinel(res, S)
    if ob is not None:
        assert_untouched(ob, S, covered_mask(bshape, vops))
    # inputs not written (unless in place)
    for k, b in gb.items():
        if out is not None and out is g[k]:
            continue
        assert np.array_equal(host(b).view(np.uint8), bases[k].view(np.uint8)), f"input {k} modified"


def _context_alive():
    """False once a sticky CUDA error has poisoned the context (every later
    call would fail too): synchronise, then run and read back one kernel."""
    import cupy
    try:
        cupy.cuda.runtime.deviceSynchronize()
        return float((cupy.arange(4, dtype=cupy.float32) + 1).sum()) == 10.0
    except Exception:  # noqa: BLE001
        return False


class _maybe_fake:
    def __init__(self, name, real):
        self.name, self.real, self.cm = name, real, None

    def __enter__(self):
        if self.name != "real":
            d = _dev(self.name, self.real)
            self.cm = fake_device(d.sm_count, d.cc)
            self.cm.__enter__()

    def __exit__(self, *a):
        if self.cm is not None:
            self.cm.__exit__(*a)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--case", type=int, default=None, help="replay one case of --seed")
    ap.add_argument("--ops", default="all", help="comma-separated operation names, or all")
    ap.add_argument("--max-elems", type=int, default=1 << 15, help="typical elements per case")
    ap.add_argument("--time-limit", type=float, default=None, help="stop drawing after this many seconds")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--json", default=None, help="write the summary and failures here")
    a = ap.parse_args(argv)

    from _util import HAS_GPU, GPU_REASON
    if not HAS_GPU:
        print(f"fuzz: {GPU_REASON}")
        return 2
    from cusoftmax import _loader
    real = real_device_info()
    ops = [o for o in ALL_OPS if o.available()]
    if a.ops != "all":
        want = set(a.ops.split(","))
        ops = [o for o in ops if o.name in want or o.fn_name in want]
    missing = [o.name for o in ALL_OPS if not o.available()]
    by_name = {o.name: o for o in ALL_OPS}
    idx = [a.case] if a.case is not None else range(a.cases)
    t0 = time.time()
    fails, done, per_op = [], 0, {}
    for i in idx:
        if a.time_limit and time.time() - t0 > a.time_limit:
            break
        rng = np.random.default_rng([a.seed, i])
        c = draw_case(rng, ops, real, a.max_elems)
        try:
            run_case(c, by_name, real)
            ok = True
        except Exception as e:  # noqa: BLE001 - every failure is reported
            ok = False
            msg = f"{type(e).__name__}: {e}"
            if not isinstance(e, AssertionError):
                msg += "\n" + traceback.format_exc(limit=6)
            fails.append({"case": i, "spec": c, "error": msg[:3000]})
            print(f"FAIL case {i}: {json.dumps(c)}\n  replay: python tools/fuzz.py --seed {a.seed} "
                  f"--case {i}\n  {msg[:1500]}", flush=True)
            if not _context_alive():
                print(f"fuzz: the CUDA context is lost after case {i} (a sticky error such as an "
                      "illegal or misaligned address): stopping; replay that case alone", flush=True)
                done += 1
                per_op[c["op"]] = per_op.get(c["op"], 0) + 1
                break
        done += 1
        per_op[c["op"]] = per_op.get(c["op"], 0) + 1
        if a.verbose and ok:
            print(f"ok {i}: {json.dumps(c)}")
        if done % 1000 == 0:
            print(f"... {done} cases, {len(fails)} failures, {time.time() - t0:.0f} s", flush=True)
    dt = time.time() - t0
    summary = {"cases": done, "seed": a.seed, "failures": len(fails), "seconds": round(dt, 1),
               "per_op": per_op, "kernels_compiled": len(_loader._kernels), "missing_ops": missing,
               "device": f"{real.sm_count} SMs, sm_{real.cc}"}
    print(f"fuzz: {done} cases, seed {a.seed}, {len(fails)} failures, {dt:.1f} s "
          f"({json.dumps(per_op)}; {len(_loader._kernels)} kernels compiled"
          + (f"; not available: {', '.join(missing)}" if missing else "") + ")")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"summary": summary, "failures": fails}, f, indent=1)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
