"""Every public operation as a uniform spec, for the robustness tests and the
fuzzer: how to make inputs, call, check against ``cusoftmax.reference``, and
plan (to find a shape per regime). Operations that do not exist yet are
listed but report ``available() == False`` (tests skip them with a reason).
"""
from __future__ import annotations

import math

import numpy as np

import cusoftmax
from cusoftmax import _dispatch, reference

from _check import check_forward, host, red_axes, random_values
from _util import TOL, np_dtype, sum_rtol, tol_key


def _f64(a):
    return reference.to_float64(host(a))


class Op:
    family = "forward"
    fn_name = ""
    log = False

    @property
    def name(self):
        return self.fn_name

    def available(self):
        return hasattr(cusoftmax, self.fn_name)

    def skip_reason(self):
        return f"cusoftmax.{self.fn_name} does not exist yet"

    @property
    def fn(self):
        return getattr(cusoftmax, self.fn_name)

    def __repr__(self):
        return self.fn_name


class Forward(Op):
    family = "forward"

    def __init__(self, log):
        self.log = log
        self.fn_name = "log_softmax" if log else "softmax"

    def make_inputs(self, rng, shape, dtype, axis=-1, special="normal", **kw):
        return {"x": random_values(rng, shape, dtype, special, axis)}

    def call(self, g, axis=-1, **kw):
        return self.fn(g["x"], axis=axis, **kw)

    def outputs(self, res):
        return [res]

    def check(self, res, h, axis=-1, ctx="", out_dtype=None, naive=False, **kw):
        check_forward(res, h["x"], axis, self.log, out_dtype=out_dtype, ctx=ctx, naive=naive)

    def plan(self, R, L, dtype, dev):
        return _dispatch.plan_rows(R, L, dtype, dtype, self.log, dev)

    def out_bytes(self, g, axis=-1, **kw):
        return g["x"].size * g["x"].dtype.itemsize


class Backward(Op):
    family = "backward"

    def __init__(self, log):
        self.log = log
        self.fn_name = "log_softmax_backward" if log else "softmax_backward"

    def make_inputs(self, rng, shape, dtype, axis=-1, special="normal", dy_dtype=None, **kw):
        x = random_values(rng, shape, "float64", "normal", axis)
        y = (reference.log_softmax if self.log else reference.softmax)(x, axis=axis)
        dy = random_values(rng, shape, dy_dtype or dtype, "normal", axis, scale=1.0)
        return {"y": y.astype(np_dtype(dtype)), "dy": dy}

    def call(self, g, axis=-1, **kw):
        kw.pop("dtype", None)
        kw.pop("algorithm", None)
        return self.fn(g["y"], g["dy"], axis=axis, **kw)

    def outputs(self, res):
        return [res]

    def reference(self, h, axis):
        f = reference.log_softmax_backward if self.log else reference.softmax_backward
        return f(h["y"], h["dy"], axis=axis)

    def check(self, res, h, axis=-1, ctx="", **kw):
        """|dx - ref| <= atol + 4 rtol x scale, where the scale bounds the
        terms that cancel: |y| (|dy| + sum |y dy|) for softmax, |dy| + e^y
        sum |dy| for log-softmax (rtol of the result's class, long-row term)."""
        y, dy = _f64(h["y"]), _f64(h["dy"])
        ref = self.reference(h, axis)
        got = _f64(res)
        assert got.shape == ref.shape, f"{ctx}: shape {got.shape} != {ref.shape}"
        axes = red_axes(axis, y.ndim)
        L = math.prod(y.shape[a] for a in axes) if y.ndim else 1
        if self.log:
            scale = np.abs(dy) + np.exp(y) * np.sum(np.abs(dy), axis=axes, keepdims=True)
        else:
            scale = np.abs(y) * (np.abs(dy) + np.sum(np.abs(y * dy), axis=axes, keepdims=True))
        key = tol_key(np.dtype(res.dtype).name)
        atol, rtol = TOL[key]
        lim = atol + 4 * (rtol + sum_rtol(key, L)) * scale
        nan_r = np.isnan(ref)
        assert np.array_equal(np.isnan(got), nan_r), f"{ctx}: NaN pattern differs"
        err = np.where(nan_r, 0, np.abs(got - ref))
        if err.size and (err > lim).any():
            i = np.unravel_index(int(np.argmax(err - lim)), err.shape)
            raise AssertionError(f"{ctx}: {int((err > lim).sum())} elements outside tolerance, worst at "
                                 f"{i}: got {got[i]!r}, reference {ref[i]!r}, allowed {lim[i]:.3g}")

    def plan(self, R, L, dtype, dev):
        f = getattr(_dispatch, "plan_backward_rows", None)
        if f is None:
            return None
        return f(R, L, dtype, dtype, dtype, self.log, dev)

    def out_bytes(self, g, axis=-1, **kw):
        try:
            from cusoftmax._backward import result_dtype
            dt = result_dtype(g["y"].dtype, g["dy"].dtype)
        except ImportError:
            dt = g["y"].dtype
        return g["y"].size * np.dtype(dt).itemsize


class TopKOp(Op):
    family = "topk"

    def __init__(self, log):
        self.log = log
        self.fn_name = "softmax_topk"

    @property
    def name(self):
        return "softmax_topk(log=True)" if self.log else "softmax_topk"

    def __repr__(self):
        return self.name

    def make_inputs(self, rng, shape, dtype, axis=-1, special="normal", **kw):
        return {"x": random_values(rng, shape, dtype, special, axis)}

    def k_for(self, shape, axis):
        if axis is None:
            n = math.prod(shape)
        else:
            n = shape[axis] if shape else 1
        return min(n, 5)

    def call(self, g, axis=-1, k=None, **kw):
        kw.pop("out", None)
        if k is None:
            k = self.k_for(g["x"].shape, axis)
        return self.fn(g["x"], k, axis=axis, log=self.log, **kw)

    def outputs(self, res):
        return [res.values, res.indices]

    def check(self, res, h, axis=-1, ctx="", k=None, out_dtype=None, **kw):
        x = h["x"]
        if k is None:
            k = self.k_for(x.shape, axis)
        ref = reference.softmax_topk(x, k, axis=axis, log=self.log)
        idx = host(res.indices)
        assert idx.shape == ref.indices.shape, f"{ctx}: indices shape {idx.shape} != {ref.indices.shape}"
        vals_nan = np.isnan(ref.values)
        # indices are exact (ties: lower index first; NaN logits last)
        assert np.array_equal(idx, ref.indices), f"{ctx}: indices differ from the reference"
        got = _f64(res.values)
        assert np.array_equal(np.isnan(got), vals_nan), f"{ctx}: NaN pattern of values differs"
        in_name = np.dtype(x.dtype).name
        key = tol_key(in_name, out_dtype)
        with np.errstate(over="ignore", invalid="ignore"):  # rounded to the result dtype
            ref = ref._replace(values=ref.values.astype(np_dtype(key)).astype(np.float64)) \
                if key != "float64" else ref
        ax = -1 if axis is None else axis
        n = math.prod(x.shape) if axis is None else x.shape[ax]
        fin = ~vals_nan & np.isfinite(ref.values)
        if self.log:
            from _util import LOG_TOL
            lim = (LOG_TOL[key] + sum_rtol(key, n)) * np.maximum(1, np.abs(ref.values))
        else:
            atol, rtol = TOL[key]
            lim = atol + (rtol + sum_rtol(key, n)) * np.abs(ref.values)
        err = np.where(fin, np.abs(got - ref.values), 0)
        assert (err <= np.where(fin, lim, 1)).all(), f"{ctx}: values outside tolerance (max error {err.max()})"
        inf_r = np.isinf(ref.values)
        assert np.array_equal(got[inf_r], ref.values[inf_r]), f"{ctx}: infinite values differ"

    def plan(self, R, L, dtype, dev):
        f = getattr(_dispatch, "plan_topk", None)
        if f is None:
            return None
        return f(R, L, min(L, 5), dtype, dtype, dev, "auto")

    def out_bytes(self, g, axis=-1, k=None, **kw):
        x = g["x"]
        if k is None:
            k = self.k_for(x.shape, axis)
        n = x.size // (x.shape[axis] if axis is not None else x.size) * k if x.size else 0
        return n * (x.dtype.itemsize + 8)


ALL_OPS = [Forward(False), Forward(True), Backward(False), Backward(True), TopKOp(False), TopKOp(True)]


def available_ops():
    return [op for op in ALL_OPS if op.available()]


# candidate (rows, L) shapes from which one per regime is picked
def regime_cases(op, dev, dtype="float32"):
    """{regime: (R, L)}: the smallest candidate shape (by elements) taking
    each regime of ``op`` on ``dev``, from the op's own planner; ops without
    a planner get shapes labelled by size."""
    sms = dev.sm_count
    Rs = sorted({1, 3, max(1, sms // 4), max(1, sms - 1), sms, 4 * sms})
    Ls = (100, 1000, 3000, 9000, 20000, 40000, 70000, 140000, 270000, 600000)
    cands = sorted(((R, L) for R in Rs for L in Ls), key=lambda s: (s[0] * s[1], s[1]))
    out = {}
    for R, L in cands:
        p = op.plan(R, L, dtype, dev)
        if p is None:
            return {"short": (64, 100), "medium": (8, 5000), "long_few": (2, 150000),
                    "long_many": (sms + 1, 40000)}
        out.setdefault(p.regime, (R, L))
    return out
