"""Suites and the one runner they share.

A suite is a list of cases, the operations timed on each, an input builder
and (optionally) a host-time probe. ``run_suite`` does the same thing for all
of them: for each case and operation, build the inputs once, then for each
provider make one call (compiles, warms up), check a sample of its rows
against ``cusoftmax.reference``, and time it with the flushed event timer.
"""
from __future__ import annotations

import math
import statistics
import sys
import time
import traceback
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from . import _cases as C
from ._providers import BACKWARD_OPS, FORWARD_OPS, TOPK_OPS, CaseInputs, registry
from ._timing import NOISE_SPREAD

#: Correctness tolerance (atol, rtol) by result dtype: |y - ref| <= atol + rtol |ref|.
TOL = {"float32": (1e-6, 1e-4), "bfloat16": (1e-4, 1.6e-2), "float16": (1e-5, 4e-3),
       "float64": (1e-12, 1e-9)}
#: Rows of each case checked against the reference (first, middle, last).
CHECK_ROWS = 3


@dataclass
class Suite:
    name: str
    help: str
    ops: tuple
    cases: Callable            # cases(quick) -> [Case]
    inputs: Callable           # inputs(pool, case, op) -> [cupy arrays]
    needs: Optional[str] = None      # cusoftmax attribute the suite needs
    providers: Optional[tuple] = None  # provider names / globs this suite restricts itself to
    host_case: Optional[C.Case] = None


# ----------------------------------------------------------------------------
# Inputs per operation
# ----------------------------------------------------------------------------
def forward_inputs(pool, case, op):
    return [pool.input(case, 0)]


def backward_inputs(pool, case, op):
    """y = (log-)softmax of a random x (computed in float32, stored in the case's
    dtype), dy random: the inputs a backward pass sees."""
    import cupy

    x = pool.segment_f32(case, 0)
    z = x - x.max(axis=case.axis, keepdims=True)
    if op == "log_softmax_backward":
        y32 = z - cupy.log(cupy.exp(z).sum(axis=case.axis, keepdims=True))
    else:
        e = cupy.exp(z)
        del z
        y32 = e / e.sum(axis=case.axis, keepdims=True)
    y = pool.cast_into(y32, case.dtype, case, 0)
    return [y, pool.input(case, 1)]


# ----------------------------------------------------------------------------
# Traffic and correctness
# ----------------------------------------------------------------------------
def traffic_bytes(op, case) -> int:
    """Minimum bytes moved: forward read x + write y; backward read y, dy + write
    dx; top-k read x once (the k outputs are negligible)."""
    n, isz, osz = case.n, C.ITEMSIZE[case.dtype], C.ITEMSIZE[case.result_dtype]
    if op in FORWARD_OPS:
        return n * (isz + osz)
    if op in BACKWARD_OPS:
        return n * (2 * isz + osz)
    return n * isz


def _rows(arr, axis, idx):
    """Rows ``idx`` (flat indices over the non-reduced axes) as float64 (len(idx), L)."""
    from cusoftmax.reference import to_float64

    a = arr.swapaxes(axis, -1) if arr.ndim > 1 else arr
    outer = a.shape[:-1]
    return np.stack([to_float64(a[np.unravel_index(i, outer)] if outer else a) for i in idx])


def _scaled_err(y, r, dtype) -> float:
    atol, rtol = TOL[dtype]
    if y.shape != r.shape:
        return math.inf
    if (np.isnan(y) != np.isnan(r)).any():
        return math.inf
    with np.errstate(invalid="ignore"):
        d = np.abs(y - r) / (atol + rtol * np.abs(r))
    d = np.where(np.isnan(r), 0.0, d)
    return float(d.max()) if d.size else 0.0


def check(op, case, arrays, result) -> float:
    """Largest |error| / tolerance over a sample of rows (<= 1 passes)."""
    from cusoftmax import reference as ref

    idx = sorted({0, case.rows // 2, case.rows - 1})[:CHECK_ROWS]
    if op in FORWARD_OPS:
        x = _rows(arrays[0], case.axis, idx)
        r = (ref.softmax if op == "softmax" else ref.log_softmax)(x, axis=-1)
        return _scaled_err(_rows(result, case.axis, idx), r, case.result_dtype)
    if op in BACKWARD_OPS:
        y, dy = (_rows(a, case.axis, idx) for a in arrays)
        r = (ref.softmax_backward if op == "softmax_backward" else ref.log_softmax_backward)(y, dy, axis=-1)
        return _scaled_err(_rows(result, case.axis, idx), r, case.result_dtype)
    # top-k: values against the reference's; the returned indices must point at those
    # probabilities (a tie-robust index check)
    x = _rows(arrays[0], case.axis, idx)
    vals = _rows(result[0], case.axis, idx)
    ind = _rows(result[1], case.axis, idx).astype(np.int64)
    want = ref.softmax_topk(x, case.k, axis=-1)
    p = ref.softmax(x, axis=-1)
    if ind.min() < 0 or ind.max() >= case.cols:
        return math.inf
    return max(_scaled_err(vals, want.values, case.result_dtype),
               _scaled_err(vals, np.take_along_axis(p, ind, axis=-1), case.result_dtype))


# ----------------------------------------------------------------------------
# The runner
# ----------------------------------------------------------------------------
@dataclass
class Context:
    timer: object
    pool: object
    ceiling_GBps: float
    check: bool = True
    verbose: bool = False


def _sync():
    import cupy
    cupy.cuda.Device().synchronize()


def _free():
    import cupy
    cupy.get_default_memory_pool().free_all_blocks()
    from . import _env
    torch, _ = _env.torch_cuda()
    if torch is not None:
        torch.cuda.empty_cache()


def _first_line(e: BaseException) -> str:
    s = str(e).strip().splitlines()
    return f"{type(e).__name__}: {s[0][:200] if s else ''}"


def measure(ctx, suite, op, prov, case, inputs) -> dict:
    """One row: check then time ``prov`` on ``case``."""
    from ._timing import SlowSkip

    row = base_row(suite, op, prov.name, prov.family, case)
    why = prov.unsupported(case, inputs)
    if why:
        row.update(status="skipped", note=why)
        return row
    try:
        call = prov.build(case, inputs)
        fn, a, k = call
        t_first = time.perf_counter()
        res = fn(*a, **k)
        _sync()
        row["first_call_s"] = time.perf_counter() - t_first  # compile + load + run, for the budget
        if ctx.check:
            err = check(op, case, inputs.arrays, prov.to_cupy(res))
            row["check_err"] = err
            row["check"] = "ok" if err <= 1.0 else f"MISMATCH (max |err|/tol = {err:.3g})"
        del res
        t = ctx.timer.gpu(call)
    except SlowSkip as e:
        row.update(status="skipped", note=str(e))
        return row
    except Exception as e:  # noqa: BLE001 - record the failure, keep benchmarking
        row.update(status="error", note=_first_line(e))
        if ctx.verbose:
            traceback.print_exc()
        return row
    return add_timing(row, case, t, ctx.ceiling_GBps)


def base_row(suite, op, provider, family, case) -> dict:
    """The description of one (suite, op, provider, case) result row."""
    return {"suite": suite, "op": op, "provider": provider, "family": family,
            "shape": list(case.shape), "rows": case.rows, "cols": case.cols, "dtype": case.dtype,
            "out_dtype": case.result_dtype, "axis": case.axis, "layout": case.layout, "k": case.k,
            "grid": case.grid, "tags": list(case.tags), "label": case.label(),
            "bytes": traffic_bytes(op, case), "status": "ok", "note": "", "check": "not run"}


def add_timing(row, case, t, ceiling_GBps) -> dict:
    """Fill a row's timing fields from a :class:`~bench._timing.Timing`."""
    gbps = row["bytes"] / (t.median_us * 1e-6) / 1e9
    row.update(median_us=t.median_us, min_us=t.min_us, p10_us=t.p10_us, p90_us=t.p90_us, reps=t.reps,
               warmup=t.warmup, attempts=t.attempts, spread=t.spread, noisy=t.spread > NOISE_SPREAD,
               GBps=gbps, fraction_of_copy=gbps / ceiling_GBps, elements_per_s=case.n / (t.median_us * 1e-6))
    return row


def _progress(i, n, case, op, rows, t0):
    cells = []
    for r in rows:
        if r["status"] == "ok":
            flag = "" if r["check"] in ("ok", "not run") else " MISMATCH"
            cells.append(f"{r['provider']} {r['GBps']:.0f}{flag}")
        else:
            cells.append(f"{r['provider']} {r['status']}")
    print(f"[{i}/{n} {time.time() - t0:5.0f}s] {op} {case.label()} {case.dtype}: " + ", ".join(cells)
          + "  (GB/s)", flush=True)


def host_rows(ctx, suite, by_op) -> list:
    """Host time per call on a small array (no sync, warm) for every provider:
    HOST_ROUNDS rounds over the providers, the median of all samples."""
    from ._timing import HOST_CALLS, HOST_ROUNDS, host_per_call_us

    if suite.host_case is None:
        return []
    out = []
    case = suite.host_case
    for op in suite.ops:
        inputs = CaseInputs(suite.inputs(ctx.pool, case, op))
        provs = [p for p in by_op.get(op, []) if not p.name.startswith("cusoftmax-")]  # auto is enough
        rows, calls = {}, {}
        for prov in provs:
            rows[prov.name] = {"suite": suite.name, "op": "host:" + op, "provider": prov.name,
                               "family": prov.family, "shape": list(case.shape), "dtype": case.dtype,
                               "k": case.k, "status": "ok", "note": "", "host_samples": []}
            try:
                fn, a, k = prov.build(case, inputs)
                fn(*a, **k)
                calls[prov.name] = (fn, a, k)
            except Exception as e:  # noqa: BLE001
                rows[prov.name].update(status="error", note=_first_line(e))
        names = list(calls)
        for rnd in range(HOST_ROUNDS):  # rotated order: no provider always first
            sh = rnd % max(1, len(names))
            for name in names[sh:] + names[:sh]:
                try:
                    rows[name]["host_samples"] += host_per_call_us(calls[name])
                except Exception as e:  # noqa: BLE001
                    rows[name].update(status="error", note=_first_line(e))
        for prov in provs:
            row = rows[prov.name]
            if row["status"] == "ok" and row["host_samples"]:
                row.update(host_us=statistics.median(row["host_samples"]), calls=HOST_CALLS,
                           rounds=HOST_ROUNDS)
            out.append(row)
            print(f"host {op} {prov.name}: {row.get('host_us', float('nan')):.2f} us/call", flush=True)
        del inputs, calls
    _free()
    return out


def run_suite(ctx, suite, quick, selection, notes, rows) -> list:
    """Append the rows of one suite to ``rows`` (timed cases, then host time);
    appending as it goes lets the caller save a partial run."""
    by_op, reg_notes = registry(selection)
    if suite.providers:
        import fnmatch
        by_op = {op: [p for p in ps if any(fnmatch.fnmatchcase(p.name, g) for g in suite.providers)]
                 for op, ps in by_op.items()}
    notes += reg_notes
    cases = suite.cases(quick)
    t0 = time.time()
    n = len(cases) * len(suite.ops)
    i = 0
    for case in cases:
        for op in suite.ops:
            i += 1
            provs = by_op.get(op, [])
            if not provs:
                continue
            try:
                inputs = CaseInputs(suite.inputs(ctx.pool, case, op))
            except Exception as e:  # noqa: BLE001 - e.g. a dtype this CuPy cannot hold
                for p in provs:
                    rows.append(base_row(suite.name, op, p.name, p.family, case))
                    rows[-1].update(status="error", note="inputs: " + _first_line(e))
                continue
            case_rows = [measure(ctx, suite.name, op, p, case, inputs) for p in provs]
            rows += case_rows
            del inputs
            _progress(i, n, case, op, case_rows, t0)
        _free()
    rows += host_rows(ctx, suite, by_op)
    return rows


def first_call_seconds(rows) -> dict:
    """Seconds spent in first calls (kernel compiles, mostly) per provider."""
    out: dict = {}
    for r in rows:
        if "first_call_s" in r:
            out[r["provider"]] = out.get(r["provider"], 0.0) + r["first_call_s"]
    return {k: round(v, 2) for k, v in sorted(out.items(), key=lambda kv: -kv[1])}


SUITES = {
    "softmax": Suite("softmax", "forward softmax + log_softmax: every provider over the issue-3 grid",
                     FORWARD_OPS, C.forward_cases, forward_inputs, host_case=C.Case((4, 4))),
    "backward": Suite("backward", "softmax_backward + log_softmax_backward vs torch's backward",
                      BACKWARD_OPS, C.backward_cases, backward_inputs, needs="softmax_backward",
                      host_case=C.Case((4, 4), n_inputs=2)),
    "topk": Suite("topk", "fused softmax + top-k vs torch.topk(softmax) and the CuPy way",
                  TOPK_OPS, C.topk_cases, forward_inputs, needs="softmax_topk",
                  providers=("cusoftmax", "torch", "cupy"), host_case=C.Case((4, 4), k=2)),
    "paper": Suite("paper", "Milakov & Gimelshein Figs 1-2: naive / safe / online (+auto), fp32, "
                   "batch 4000 and 10, V = 1e2..1e6", ("softmax",), C.paper_cases, forward_inputs,
                   providers=("cusoftmax*",)),
    "paper-topk": Suite("paper-topk", "Figs 3-4: safe unfused / safe fused / online fused top-k at K=5, "
                        "then a K sweep", TOPK_OPS, C.paper_topk_cases, forward_inputs,
                        needs="softmax_topk", providers=("cusoftmax*",)),
}
#: Every suite in the order ``all`` runs them ("copy" is the ceiling alone).
ALL = ("copy", "softmax", "backward", "topk", "paper", "paper-topk")


def missing_function(suite) -> Optional[str]:
    """Why a suite cannot run here (its cusoftmax function is absent), else None."""
    if suite.needs is None:
        return None
    from . import _env
    cs, why = _env.optional("cusoftmax")
    if cs is None:
        return why
    if not hasattr(cs, suite.needs):
        return f"cusoftmax.{suite.needs} does not exist yet in this build: suite '{suite.name}' skipped"
    return None


def log(msg):
    print(msg, file=sys.stderr, flush=True)
