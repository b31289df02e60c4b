"""Checking helpers shared by the GPU tests and ``tools/fuzz.py``.

* ``check_forward``: a softmax / log_softmax result against the float64
  reference, with the tolerance table of ``_util`` (NaN/inf pattern exact,
  finite values within tolerance, rows summing to 1).
* views: ``apply_view`` / ``base_shape_for`` build strided, sliced, permuted
  and offset views of a contiguous base identically with NumPy and CuPy, so
  the host keeps an exact copy of every GPU input without copying views back.
* dispatch: ``plan_of`` (which kernel a call takes), ``fake_device`` (run the
  dispatcher as if on another GPU: an sm_80 without clusters, or a GPU with 2
  SMs whose small grids exercise every grid-stride loop), and the threshold
  lengths of ``_dispatch`` (``row_lengths``, ``row_counts``, ``col_lengths``),
  derived from its constants, never copied by hand.
"""
from __future__ import annotations

import atexit
import contextlib
import json
import math
import os
import sys

import numpy as np

from _util import LOG_TOL, TOL, np_dtype, sum_rtol, tol_key, tolerance  # noqa: F401

from cusoftmax import _dispatch, reference
from cusoftmax._dispatch import DeviceInfo

#: Written into ``out=`` before a call: no valid result equals it
#: (probabilities lie in [0, 1], log-probabilities in [-inf, 0], or NaN).
SENTINEL = {False: -7.0, True: 7.0}

# ----------------------------------------------------------------------------
# Tolerance statistics: the largest error / tolerance ratio seen per class,
# written at exit to $CUSOFTMAX_TOL_STATS (used to calibrate the table).
# ----------------------------------------------------------------------------
_stats: dict = {}


def _record(key, ratio, ctx):
    old = _stats.get(key)
    if old is None or ratio > old[0]:
        _stats[key] = (float(ratio), ctx)


@atexit.register
def _dump_stats():  # pragma: no cover - diagnostics only
    path = os.environ.get("CUSOFTMAX_TOL_STATS")
    if path and _stats:
        with open(path, "a") as f:
            json.dump({f"{k[0]}/{k[1]}": v for k, v in sorted(_stats.items())}, f, indent=1)
            f.write("\n")


# ----------------------------------------------------------------------------
# Reference comparison
# ----------------------------------------------------------------------------
def host(a):
    """A CuPy (or NumPy) array as a NumPy array of its own dtype."""
    return a.get() if hasattr(a, "get") and not isinstance(a, np.ndarray) else np.asarray(a)


def red_axes(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (tuple, list)):
        return tuple(sorted(a % ndim for a in axis))
    return (axis % ndim,)


def _describe(idx, y, ref):
    return f"at {tuple(int(i) for i in idx)}: got {y[tuple(idx)]!r}, reference {ref[tuple(idx)]!r}"


def check_forward(y, xh, axis=-1, log=False, out_dtype=None, ctx="", ref=None, naive=False):
    """Assert that ``y`` (GPU or host) is softmax / log_softmax of the host
    array ``xh`` along ``axis`` within the tolerance table.

    NaN positions must match the reference's exactly, infinities (log: -inf)
    too; finite values lie within (atol, rtol) / LOG_TOL, with the long-row
    term for the row length L; every row that is not NaN sums to 1 (float32:
    within 1e-5, the issue's figure, plus the long-row term).

    ``naive``: the result of algorithm="naive" (no max subtraction), whose
    exponent x itself is rounded: its errors scale with the row's largest
    |x| (2 u |x| relative, and absolute for log-softmax) instead of |x - m|.
    """
    in_name = np.dtype(xh.dtype).name
    out_name = in_name if out_dtype is None else np.dtype(np_dtype(out_dtype) if isinstance(out_dtype, str)
                                                          else out_dtype).name
    yh = reference.to_float64(host(y))
    assert yh.shape == xh.shape, f"{ctx}: shape {yh.shape} != {xh.shape}"
    if ref is None:
        ref = (reference.log_softmax if log else reference.softmax)(xh, axis=axis)
    axes = red_axes(axis, xh.ndim)
    L = math.prod(xh.shape[a] for a in axes) if xh.ndim else 1
    # the reference rounded to the result dtype: where it overflows (log of
    # float32 +-3e38 inputs) the result is -inf as well
    with np.errstate(over="ignore", invalid="ignore"):
        ref_q = ref.astype(np_dtype(out_name)).astype(np.float64)
    nan_y, nan_r = np.isnan(yh), np.isnan(ref)
    if not np.array_equal(nan_y, nan_r):
        bad = np.argwhere(nan_y != nan_r)
        raise AssertionError(f"{ctx}: NaN pattern differs at {len(bad)} positions, first "
                             + _describe(bad[0], yh, ref))
    inf_r = np.isinf(ref_q)
    if not np.array_equal(np.isinf(yh), inf_r) or not np.array_equal(yh[inf_r], ref_q[inf_r]):
        bad = np.argwhere((np.isinf(yh) != inf_r) | (inf_r & (yh != ref_q)))
        raise AssertionError(f"{ctx}: infinities differ at {len(bad)} positions, first "
                             + _describe(bad[0], yh, ref_q))
    fin = ~(nan_r | inf_r)
    key = tol_key(in_name, out_name)
    with np.errstate(invalid="ignore"):
        err = np.where(fin, np.abs(yh - ref), 0.0)
        extra = 0.0
        if naive and xh.size:
            xf = np.abs(reference.to_float64(xh))
            xm = np.max(np.where(np.isfinite(xf), xf, 0.0), axis=axes, keepdims=True)
            extra = 4.0 * (2.0 ** -53 if key == "float64" else 2.0 ** -24) * xm
        if log:
            tl = tolerance(in_name, out_name, L, log=True)
            lim = tl * np.maximum(1.0, np.abs(ref)) + extra
        else:
            atol, rtol = tolerance(in_name, out_name, L)
            lim = atol + (rtol + extra) * np.abs(ref)
    if err.size:
        ratio = err / np.where(fin, lim, 1.0)
        worst = np.unravel_index(int(np.argmax(ratio)), ratio.shape)
        _record((key, "log" if log else "softmax"), ratio[worst], ctx)
        if ratio[worst] > 1.0:
            nbad = int(np.count_nonzero(ratio > 1.0))
            raise AssertionError(
                f"{ctx}: {nbad} elements outside tolerance ({key}, L={L}), worst "
                + _describe(worst, yh, ref) + f", error {err[worst]:.3g} > allowed {lim[worst]:.3g}")
    if not log and xh.size:
        # rows: the reduced axes summed; rows whose reference is NaN excluded
        s = np.sum(yh, axis=axes)
        s_ok = ~np.isnan(np.sum(ref, axis=axes))
        atol, rtol = tolerance(in_name, out_name, L)
        bound = (1e-5 + sum_rtol(key, L)) if key == "float32" else (rtol + atol * L)
        dev = np.abs(np.where(s_ok, s, 1.0) - 1.0)
        if dev.size and dev.max() > bound:
            i = np.unravel_index(int(np.argmax(dev)), dev.shape)
            raise AssertionError(f"{ctx}: row {tuple(int(k) for k in i)} sums to {s[i]!r} "
                                 f"(|sum - 1| > {bound:.3g})")
    return yh


def assert_untouched(base_after, sentinel, covered_mask, ctx=""):
    """Elements of an ``out`` base outside the view must still hold the
    sentinel (nothing written out of bounds)."""
    b = reference.to_float64(host(base_after)).reshape(-1)
    outside = ~covered_mask.reshape(-1)
    bad = np.flatnonzero(outside & (b != sentinel))
    if bad.size:
        raise AssertionError(f"{ctx}: {bad.size} elements outside the output view were written, "
                             f"first at flat index {bad[0]} ({b[bad[0]]!r})")


def assert_no_sentinel(y, sentinel, ctx=""):
    yh = reference.to_float64(host(y))
    bad = np.argwhere(yh == sentinel)
    if bad.size:
        raise AssertionError(f"{ctx}: {len(bad)} output elements never written, first at "
                             f"{tuple(int(i) for i in bad[0])}")


# ----------------------------------------------------------------------------
# Views of a contiguous base, identical for NumPy and CuPy
# ----------------------------------------------------------------------------
def apply_view(a, ops):
    """Apply view ops in order. Ops: ("T",), ("perm", p), ("slice", axis,
    start, stop, step), ("flat", offset, shape) (on a 1-D base)."""
    for op in ops:
        kind = op[0]
        if kind == "T":
            a = a.T
        elif kind == "perm":
            a = a.transpose(op[1])
        elif kind == "slice":
            _, ax, start, stop, step = op
            idx = [slice(None)] * a.ndim
            idx[ax] = slice(start, stop, step)
            a = a[tuple(idx)]
        elif kind == "flat":
            _, off, shape = op
            a = a[off:off + math.prod(shape)].reshape(shape)
        else:  # pragma: no cover
            raise ValueError(op)
    return a


def base_shape_for(shape, ops):
    """Shape of the contiguous base that ``apply_view(base, ops)`` maps onto
    an array of ``shape`` (walks the ops backwards)."""
    s = list(shape)
    for op in reversed(ops):
        kind = op[0]
        if kind == "T":
            s = s[::-1]
        elif kind == "perm":
            p = op[1]
            t = [0] * len(s)
            for i, pi in enumerate(p):
                t[pi] = s[i]
            s = t
        elif kind == "slice":
            _, ax, start, stop, step = op
            n = s[ax]
            st = abs(step or 1)
            lo = start or 0  # only start=None with negative steps
            s[ax] = lo + (n - 1) * st + 1 if n else lo
        elif kind == "flat":
            s = [math.prod(s) + op[1]]
    return tuple(s)


LAYOUTS = ("c", "f", "transposed", "perm", "slice1", "step2", "neg", "rowslice", "offset",
           "neg_step")


def layout_ops(name, ndim, randint):
    """View ops for a layout name; ``randint(lo, hi)`` (inclusive) supplies
    randomness (hypothesis ``draw`` or a NumPy generator)."""
    if name == "c" or ndim == 0:
        return []
    if name == "f":
        return [("T",)]
    if name == "transposed":
        if ndim < 2:
            return [("slice", 0, None, None, -1)]
        p = list(range(ndim))
        p[-1], p[-2] = p[-2], p[-1]
        return [("perm", tuple(p))]
    if name == "perm":
        p = list(range(ndim))
        for i in range(ndim - 1, 0, -1):  # Fisher-Yates with the supplied randomness
            j = randint(0, i)
            p[i], p[j] = p[j], p[i]
        return [("perm", tuple(p))]
    if name == "slice1":
        return [("slice", ndim - 1, 1, None, 1)]
    if name == "step2":
        return [("slice", ndim - 1, None, None, 2)]
    if name == "neg":
        return [("slice", ndim - 1, None, None, -1)]
    if name == "rowslice":
        return [("slice", 0, 1, None, 1)]
    if name == "offset":
        return [("flat", randint(1, 7), None)]
    if name == "neg_step":
        return [("slice", randint(0, ndim - 1), None, None, -2)]
    raise ValueError(name)


def finalize_ops(ops, shape):
    """Fill the target shape into "flat" ops."""
    return [("flat", op[1], tuple(shape)) if op[0] == "flat" else op for op in ops]


def covered_mask(base_shape, ops):
    """Boolean mask over the base of the elements a view covers."""
    idx = np.arange(math.prod(base_shape), dtype=np.int64).reshape(base_shape)
    m = np.zeros(idx.size, dtype=bool)
    m[apply_view(idx, ops).reshape(-1)] = True
    return m.reshape(base_shape)


# ----------------------------------------------------------------------------
# Dispatch helpers
# ----------------------------------------------------------------------------
def plan_of(x, axis=-1, dtype=None, algorithm="auto", log=False, out=None):
    """The regime a call takes: "warp" | "block" | ... | "cols" | "copy/<regime>"
    | "empty" | "cast" (integer input, re-dispatched), or "?" when the
    internal API moved."""
    from cusoftmax import _api

    try:
        p = _api._prepare(x, axis, dtype, algorithm, log, out)
    except TypeError:
        return "?"
    if p.kind in ("cast", "empty"):
        return p.kind
    regime = p.launch.plan.regime
    return f"copy/{regime}" if p.kind == "copy" else regime


def clear_caches():
    """Forget prepared call plans (all ``_cache`` dicts of cusoftmax modules)."""
    for name, mod in list(sys.modules.items()):
        if name.startswith("cusoftmax") and isinstance(getattr(mod, "_cache", None), dict):
            mod._cache.clear()


@contextlib.contextmanager
def fake_device(sm_count, cc, device_id=0):
    """Plan calls on ``device_id`` as if it had ``sm_count`` SMs and compute
    capability ``cc`` (kernels still run on the real GPU: every plan for a
    smaller or older GPU is valid on a newer one)."""
    from cusoftmax import _launch

    old = _launch._devinfo.get(device_id)
    _launch._devinfo[device_id] = DeviceInfo(sm_count, cc)
    clear_caches()
    try:
        yield _launch._devinfo[device_id]
    finally:
        if old is None:
            _launch._devinfo.pop(device_id, None)
        else:
            _launch._devinfo[device_id] = old
        clear_caches()


def real_device_info(device_id=0):
    from cusoftmax._launch import device_info
    return device_info(device_id)


def _around(vals, lo=1, hi=None, extra=()):
    out = set()
    for v in vals:
        for d in (-1, 0, 1) + tuple(extra):
            w = v + d
            if w >= lo and (hi is None or w <= hi):
                out.add(int(w))
    return out


def _plan_key(p):
    return (p.regime, p.kernel, p.pre_kernel, p.block)


def _transitions(f, lo, hi):
    """Points v in (lo, hi] where f(v) != f(v - 1), found by dense
    geometric sampling (2% steps) and bisection between unequal samples."""
    pts = sorted({v for v in range(lo, min(hi, lo + 64) + 1)}
                 | {int(lo + 64 * 2 ** (k / 32)) for k in range(0, 32 * 40)
                    if lo + 64 * 2 ** (k / 32) <= hi} | {hi})
    out = set()
    prev_v, prev_f = pts[0], f(pts[0])
    for v in pts[1:]:
        fv = f(v)
        if fv != prev_f:
            a, b = prev_v, v  # f(a) != f(b): bisect to the first change
            fa = prev_f
            while b - a > 1:
                m = (a + b) // 2
                if f(m) == fa:
                    a = m
                else:
                    b = m
            out.add(b)
        prev_v, prev_f = v, fv
    return out


_len_cache: dict = {}


def row_lengths(in_dtype, out_dtype, dev: DeviceInfo, max_len=None):
    """Row lengths at and +-1 around every point where ``plan_rows`` changes
    its kernel, for this dtype pair on ``dev``, for row counts from 1 to many,
    aligned / misaligned / unvectorised rows. Found by scanning the
    dispatcher itself, so they follow any retuning of its thresholds; plus the
    regime limits ``row_thresholds`` documents and the streaming chunk sizes."""
    o = out_dtype or in_dtype
    hi = 1 << 20
    key = (in_dtype, o, dev)
    vals = _len_cache.get(key)
    if vals is None:
        vals = set()
        sms = dev.sm_count
        for R in sorted({1, 3, max(1, sms // 16), max(1, sms // 4), max(1, sms - 1), sms, 8 * sms}):
            for vec, mis in ((True, False), (True, True), (False, False)):
                def f(L, R=R, vec=vec, mis=mis):
                    return _plan_key(_dispatch.plan_rows(R, L, in_dtype, o, False, dev, "auto", vec, mis))
                vals |= _transitions(f, 1, hi)
        for aligned in (True, False):
            pack = _dispatch.pack_width(in_dtype, o) if aligned else 1
            thr = _dispatch.row_thresholds(in_dtype, o, dev, aligned)
            vals |= {v for k, v in thr.items() if k != "few_rows"}
            for name in ("STREAM_THREADS", "SPLIT_THREADS"):
                t = getattr(_dispatch, name, None)
                if t:
                    vals.add(t * getattr(_dispatch, "STREAM_UNROLL", 1) * pack)
            vals.add(getattr(_dispatch, "SPLIT_MIN_PACKS", 1) * pack)
        vals.update((1, 2, 3))
        vals = sorted(_around(vals, hi=hi))
        _len_cache[key] = vals
    return [v for v in vals if max_len is None or v <= max_len]


def row_counts(dev: DeviceInfo, max_rows=None, L=None, in_dtype="float32", out_dtype=None):
    """Row counts at and +-1 around the dispatcher's row boundaries: every
    row count where ``plan_rows`` changes kernel for rows of ``L`` (scanned
    up to 4 x SMs), and the grid caps (SMs x MAX_BLOCKS_PER_SM blocks, times
    the rows a warp-kernel block handles) beyond which kernels loop."""
    vals = {1, 2, 3, 4, 5, 7}
    wpb = _dispatch.WARP_KERNEL_THREADS // 32
    cap = dev.sm_count * _dispatch.MAX_BLOCKS_PER_SM
    for lanes in (1, 2, 4, 8, 16, 32):
        rpb = wpb * (32 // lanes)
        vals.update((rpb, cap * rpb))
    vals.add(_dispatch.FEW_ROWS_PER_SM * dev.sm_count)
    # 32-bit rows: where the warp regime's reach changes with the row count
    vals.update((_dispatch.WARP_LONG_MIN_ROWS, _dispatch.WARP_LONG_MIN_ROWS_LOG,
                 _dispatch.WARP_ONE_PACK_MAX_ROWS))
    vals.add(cap)
    vals.add(max(1, cap // _dispatch.MAX_CLUSTER))
    if L is not None:
        o = out_dtype or in_dtype
        prev = None
        for R in range(1, 4 * dev.sm_count + 2):
            k = _plan_key(_dispatch.plan_rows(R, L, in_dtype, o, False, dev))
            if prev is not None and k != prev:
                vals.add(R)
            prev = k
    return sorted(_around(vals, hi=max_rows))


def col_lengths(dev: DeviceInfo, max_len=None, in_dtype="float32", out_dtype=None):
    """Reduced-axis lengths where ``plan_cols`` changes kernel (block size),
    scanned for several (O, I), and the in-register limits
    (threads / tx) x COLS_CAP for every block size and tile width."""
    o = out_dtype or in_dtype
    vals = {1, 2, 3}
    t = _dispatch.COLS_THREADS
    while t <= _dispatch.MAX_BLOCK_THREADS:
        for tx in (1, 2, 4, 8, 16, 32):
            vals.add((t // tx) * _dispatch.COLS_CAP)
        t *= 2
    for O, I in ((1, 1), (1, 32), (4, 8), (dev.sm_count, 64)):
        def f(L, O=O, I=I):
            return _plan_key(_dispatch.plan_cols(O, L, I, in_dtype, o, False, dev)) + \
                (_dispatch.plan_cols(O, L, I, in_dtype, o, False, dev).extra,)
        vals |= _transitions(f, 1, 1 << 17)
    return sorted(_around(vals, hi=max_len))


def inner_lengths():
    """Inner (unit-stride) lengths around the cols kernel's tile widths."""
    return sorted(_around({1, 2, 4, 8, 16, 32, 64}, hi=70))


# ----------------------------------------------------------------------------
# Input values
# ----------------------------------------------------------------------------
SPECIALS = ("normal", "neg_inf_one", "neg_inf_row", "pos_inf", "nan", "huge", "huge_f32",
            "equal", "tiny_spread", "mixed")


def fill_special(rows2d, kind, dtype_name, rng):
    """Overwrite a (rows, L) float64 host block in place with a special-value
    pattern (rows chosen at random get the pattern)."""
    R, L = rows2d.shape
    if R == 0 or L == 0:
        return rows2d
    sel = rng.random(R) < 0.5
    sel[rng.integers(R)] = True
    cols = rng.integers(0, L, size=R)
    big = {"float16": 6.0e4, "bfloat16": 3.0e38, "float32": 3.0e38, "float64": 1.0e300}[dtype_name]
    if kind == "neg_inf_one":
        rows2d[sel, cols[sel]] = -np.inf
    elif kind == "neg_inf_row":
        rows2d[sel] = -np.inf
    elif kind == "pos_inf":
        rows2d[sel, cols[sel]] = np.inf
    elif kind == "nan":
        rows2d[sel, cols[sel]] = np.nan
    elif kind == "huge":
        rows2d[sel] = rng.choice([-1e4, 1e4, 0.0], size=(int(sel.sum()), L))
    elif kind == "huge_f32":
        rows2d[sel] = rng.choice([-big, big, -big / 3, 0.0], size=(int(sel.sum()), L))
    elif kind == "equal":
        rows2d[sel] = rng.normal(size=(int(sel.sum()), 1)) * 10
    elif kind == "tiny_spread":
        rows2d[sel] = 50.0 + rng.normal(size=(int(sel.sum()), L)) * 1e-3
    elif kind == "mixed":
        rows2d[sel, cols[sel]] = -np.inf
        c2 = rng.integers(0, L, size=R)
        rows2d[sel, c2[sel]] = rng.choice([1e4, -1e4, 30.0], size=int(sel.sum()))
    return rows2d


def random_values(rng, shape, dtype_name, special="normal", axis=-1, scale=None):
    """Host array of ``dtype_name`` (rounded on the host) with optional
    special values along rows of the reduced ``axis``."""
    n = math.prod(shape)
    scale = scale if scale is not None else float(rng.choice([1.0, 3.0, 10.0]))
    v = rng.standard_normal(n) * scale
    if special != "normal" and n:
        axes = red_axes(axis, len(shape))
        keep = [d for d in range(len(shape)) if d not in axes]
        moved = v.reshape(shape).transpose(keep + list(axes))
        L = math.prod(shape[d] for d in axes) if axes else 1
        blk = np.ascontiguousarray(moved).reshape(-1, L)
        fill_special(blk, special, dtype_name, rng)
        inv = np.argsort(keep + list(axes))
        v = blk.reshape(moved.shape).transpose(inv).reshape(-1)
    with np.errstate(over="ignore"):
        return v.reshape(shape).astype(np_dtype(dtype_name))
