"""Public NumPy-style functions (thin layer over ``_launch``)."""
from __future__ import annotations

import math

import numpy

from . import _dispatch
from ._arrays import (analyze_layout, as_cupy, check_algorithm, check_out, float_dtype_for,
                      out_dtype_for, normalize_axes)
from ._launch import Launch, capture_guard, device_info, folded_args, on_device

__all__ = ["softmax", "log_softmax"]

from ._launch import _cupy, _get_device, _ndarray  # noqa: E402  (one CuPy import for all ops)


def _dense_strides(shape, xstrides, itemsize):
    """Strides (bytes) of a dense array with the same axis order as
    ``xstrides`` (NumPy's order='K'); C order for ties."""
    nd = len(shape)
    order = sorted(range(nd), key=lambda d: (-abs(xstrides[d]), d))
    strides = [0] * nd
    s = itemsize
    for d in reversed(order):
        strides[d] = s
        s *= max(shape[d], 1)
    return tuple(strides)


class _Prepared:
    """Everything a call signature needs, computed once."""
    __slots__ = ("kind", "shape", "out_dtype", "out_strides", "c_order", "launch", "args",
                 "offx", "offy", "axes", "work_dtype", "red_axes", "keep_axes", "prm")

    def run(self, x, y):
        xp = x.data.ptr + self.offx
        yp = y.data.ptr + self.offy
        if self.prm is not None:  # one prebuilt launch: the common case
            self.launch.fast(self.prm, xp, yp)
        elif self.kind == "rows":
            self.launch.rows(xp, yp, *self.args)
        elif self.kind == "cols":
            self.launch.cols(xp, yp, *self.args)
        else:  # copy: run on a fresh contiguous (keep..., red...) copy, then scatter
            xt = x.transpose(self.keep_axes + self.red_axes)
            xc = _cupy.empty(xt.shape, xt.dtype)  # fresh: 256-byte aligned, like yc
            xc[...] = xt
            yc = _cupy.empty(xt.shape, self.out_dtype)
            self.launch.rows(xc.data.ptr, yc.data.ptr, *self.args)
            inv = numpy.argsort(self.keep_axes + self.red_axes)
            y[...] = yc.transpose(tuple(int(i) for i in inv))


def _alloc(p: _Prepared):
    if p.c_order:
        return _cupy.empty(p.shape, p.out_dtype)
    nbytes = p.out_dtype.itemsize * math.prod(p.shape)
    return _cupy.ndarray(p.shape, p.out_dtype, _cupy.cuda.alloc(nbytes), p.out_strides)


def _prepare(x, axis, dtype, algorithm, log, out):
    """Validate a call and build its launch (the slow path, once per signature)."""
    check_algorithm(algorithm, _dispatch.ALGORITHMS)
    work = float_dtype_for(x.dtype)
    odt = out_dtype_for(work, dtype)
    axes = normalize_axes(axis, x.ndim)
    shape = x.shape
    for a in axes:
        if shape[a] == 0:
            raise ValueError(f"cannot take softmax over an empty axis (axis {a} of shape {shape} has "
                             "length 0)")
    p = _Prepared()
    p.shape, p.out_dtype, p.axes, p.work_dtype = shape, odt, axes, work
    p.c_order = True
    p.out_strides = None
    p.prm = None
    p.offx = p.offy = 0
    if work != x.dtype:
        p.kind = "cast"  # integer input: promote, then rerun on the float array
        return p
    if x.size == 0:
        p.kind = "empty"
        return p
    isz, osz = x.dtype.itemsize, odt.itemsize
    if out is None:
        if x.flags.c_contiguous or x.ndim <= 1:
            ystrides = tuple(int(s) for s in _c_strides(shape, osz))
        else:
            p.c_order = False
            ystrides = _dense_strides(shape, x.strides, osz)
            p.out_strides = ystrides
        yptr_mod = 0  # fresh allocations are 256-byte aligned
    else:
        ystrides = out.strides
        yptr_mod = out.data.ptr & 15
    xs = [s // isz for s in x.strides]
    ys = [s // osz for s in ystrides]
    dev = device_info(x.data.device_id)
    tin, tout = _dtype_key(x.dtype), _dtype_key(odt)
    lay = None
    if all(s % isz == 0 for s in x.strides) and all(s % osz == 0 for s in ystrides):
        lay = analyze_layout(shape, [xs, ys], set(axes))
    if lay is not None and lay[0] == "cols" and algorithm != "auto":
        lay = None  # the paper's streaming forms run on rows: copy
    plan = None
    if lay is not None and lay[0] == "cols":
        _, O, L, I, (sxo, syo), (sxl, syl), (ox, oy) = lay
        # widest vector along I (<= 16 bytes) that pointers, strides and I allow
        xe, ye = (x.data.ptr & 15) // isz + ox, yptr_mod // osz + oy
        vf = vec = _dispatch.VECTOR_BYTES // max(isz, osz)
        while vec > 1 and any(v % vec for v in (xe, ye, I, sxo, sxl, syo, syl)):
            vec //= 2
        dense = (xe % vf == 0 and ye % vf == 0 and sxl == I and syl == I
                 and (O == 1 or (sxo == L * I and syo == L * I)))
        # rows off the 16-byte grid alike in x and y (skewed packs)
        skew = (isz == osz and x.data.ptr % isz == 0 and (xe - ye) % vf == 0 and (sxl - syl) % vf == 0
                and (sxo - syo) % vf == 0)
        plan = _dispatch.plan_cols(O, L, I, tin, tout, log, dev, vec, dense, skew)
        if _dispatch.cols_prefers_copy(plan, O, L, I, dev):
            lay = None
    if lay is None:
        p.kind = "copy"
        p.red_axes = axes
        p.keep_axes = tuple(d for d in range(x.ndim) if d not in axes)
        R = math.prod(shape[d] for d in p.keep_axes)
        L = math.prod(shape[d] for d in axes)
        # rows of the fresh copies start on a vector boundary only if L is a
        # multiple of the pack width
        mis = R > 1 and L % _dispatch.pack_width(tin, tout) != 0
        plan = _dispatch.plan_rows(R, L, tin, tout, log, dev, algorithm, True, mis)
        p.launch = Launch(plan, x.data.device_id)
        p.args = (R, L, L, L)
        return p
    if lay[0] == "rows":
        _, R, L, (sxr, syr), (ox, oy) = lay
        p.kind = "rows"
        p.offx, p.offy = ox * isz, oy * osz
        pack = _dispatch.pack_width(tin, tout)
        xe = ((x.data.ptr & 15) // isz + ox) % pack if (x.data.ptr % isz == 0) else -1
        ye = (yptr_mod // osz + oy) % pack
        vector_ok = xe == ye and (sxr - syr) % pack == 0 and (R == 1 or (sxr % pack == syr % pack))
        mis = xe != 0 or (R > 1 and sxr % pack != 0)
        plan = _dispatch.plan_rows(R, L, tin, tout, log, dev, algorithm, vector_ok, mis)
        p.launch = Launch(plan, x.data.device_id)
        p.args = (R, L, sxr, syr)
        p.prm = p.launch.params((0, 0, R, L, sxr, syr) + plan.extra)
        if p.prm is not None:
            p.prm.describe = f"{R} rows of {L} elements"
        return p
    p.kind = "cols"
    p.offx, p.offy = ox * isz, oy * osz
    p.launch = Launch(plan, x.data.device_id)
    plan = p.launch.plan  # (its fallback where the GPU cannot run the plan's clusters)
    L, I, sxl, syl = folded_args(plan, L, I, sxl, syl)  # dense slabs read as (L / fold, I x fold)
    p.args = (O, L, I, sxo, sxl, syo, syl)
    p.prm = p.launch.params((0, 0, O, L, I, sxo, sxl, syo, syl, plan.extra[0]))
    if p.prm is not None:
        p.prm.describe = f"shape (outer {O}, reduced {L}, inner {I})"
    return p


def _c_strides(shape, itemsize):
    out = []
    s = itemsize
    for n in reversed(shape):
        out.append(s)
        s *= max(n, 1)
    return tuple(reversed(out))


def _dtype_key(dt) -> str:
    return dt.name


_cache: dict = {}
_CACHE_MAX = 4096


def _forward(x, axis, dtype, out, algorithm, log):
    if type(x) is not _ndarray:
        x = as_cupy(x)
    data = x.data
    dev = data.device_id
    try:
        key = (x.shape, x.strides, x.dtype, axis, dtype, algorithm, log, data.ptr & 15, dev,
               None if out is None else (out.strides, out.dtype, out.data.ptr & 15))
        p = _cache.get(key)
    except (TypeError, AttributeError):  # unhashable axis/dtype, odd out: slow path
        key, p = None, None
    if p is None:
        if out is not None and not isinstance(out, _ndarray):
            raise TypeError(f"out must be a cupy.ndarray, got {type(out).__name__}")
        p = _prepare(x, axis, dtype, algorithm, log, out)
        if key is not None:
            if len(_cache) >= _CACHE_MAX:
                _cache.clear()
            _cache[key] = p
    if out is None and p.prm is not None and _get_device() == dev:
        # hot path: allocate, one prebuilt launch
        y = _ndarray(p.shape, p.out_dtype) if p.c_order else _alloc(p)
        p.launch.fast(p.prm, data.ptr + p.offx, y.data.ptr + p.offy)
        return y
    if out is not None:
        check_out(out, p.shape, p.out_dtype, dev, (("x", x),))
    if p.kind == "cast":
        with capture_guard():
            return _forward(x.astype(p.work_dtype), axis, dtype, out, algorithm, log)
    with on_device(dev), capture_guard():
        y = _alloc(p) if out is None else out
        if p.kind != "empty":
            p.run(x, y)
    return y


def softmax(x, /, axis=-1, *, dtype=None, out=None, algorithm="auto"):
    r"""Softmax along ``axis``: ``exp(x - max) / sum(exp(x - max))``.

    Computed in one read of ``x`` and one write of the result wherever the
    row fits on chip, using the online normaliser of Milakov & Gimelshein
    (2018, https://arxiv.org/abs/1805.02867) to combine the running
    (max, sum) pairs of threads, blocks and clusters.

    Parameters
    ----------
    x : cupy.ndarray or GPU array
        Input. Objects exposing ``__cuda_array_interface__`` or ``__dlpack__``
        (torch, JAX) are taken without a copy. float16, bfloat16, float32 and
        float64 are supported; integers promote as ``numpy.exp`` does.
    axis : int, tuple of ints or None, optional
        Axis or axes to normalise over (default ``-1``). ``None``: all axes.
    dtype : dtype, optional
        Result dtype (a float type). Default: the input's float type.
    out : cupy.ndarray, optional
        Preallocated result of the right shape, dtype and device. May be ``x``
        itself (in place); any other overlap with ``x`` raises ``ValueError``.
    algorithm : {"auto", "naive", "safe", "online"}, optional
        ``"auto"`` (default) picks the fastest kernel. The others run the
        paper's streaming forms, one block per row: ``"naive"`` (Algorithm 1,
        no max subtraction: overflows once ``exp(x)`` does, i.e. x > ~88 in
        float32), ``"safe"`` (Algorithm 2, three passes) and ``"online"``
        (Algorithm 3, two passes).

    Returns
    -------
    cupy.ndarray
        The probabilities, on ``x``'s device (``out`` if given).

    Notes
    -----
    Arithmetic is float32 for 16- and 32-bit types and float64 when the input
    or result is float64. Special values follow ``scipy.special.softmax``: a
    NaN or +inf in a row makes the row NaN, a row of all -inf is NaN, and a
    -inf element gives exactly 0 in an otherwise finite row.

    Examples
    --------
    >>> import cupy, cusoftmax
    >>> x = cupy.asarray([[1.0, 2.0, 3.0], [1.0, 3.0, 5.0]])
    >>> cusoftmax.softmax(x).round(4)
    array([[0.09  , 0.2447, 0.6652],
           [0.0159, 0.1173, 0.8668]])
    """
    return _forward(x, axis, dtype, out, algorithm, False)


def log_softmax(x, /, axis=-1, *, dtype=None, out=None, algorithm="auto"):
    r"""Log-softmax along ``axis``: ``x - max - log(sum(exp(x - max)))``.

    Same parameters, rules and kernels as :func:`softmax`; the result is
    the logarithm of the probabilities, computed without forming them (so
    tiny probabilities keep full relative precision).

    Parameters
    ----------
    x : cupy.ndarray or GPU array
        Input (see :func:`softmax`).
    axis : int, tuple of ints or None, optional
        Axis or axes to normalise over (default ``-1``).
    dtype : dtype, optional
        Result dtype (a float type).
    out : cupy.ndarray, optional
        Preallocated result; may be ``x`` itself.
    algorithm : {"auto", "naive", "safe", "online"}, optional
        As for :func:`softmax`.

    Returns
    -------
    cupy.ndarray
        The log-probabilities. A -inf element gives -inf in an otherwise
        finite row; NaN or +inf in a row, or a row of all -inf, give NaN.

    Examples
    --------
    >>> import cupy, cusoftmax
    >>> cusoftmax.log_softmax(cupy.asarray([1.0, 2.0, 3.0])).round(4)
    array([-2.4076, -1.4076, -0.4076])
    """
    return _forward(x, axis, dtype, out, algorithm, True)
