"""Backward passes: ``softmax_backward`` and ``log_softmax_backward``.

Both are the vector-Jacobian product of the forward with respect to its
input, computed from the forward's output ``y`` and the incoming gradient
``dy`` in one kernel that reads ``y`` and ``dy`` once and writes ``dx`` once
(kernels/softmax_backward.cu; plans in ``_dispatch``'s backward section).

Like the forward, each distinct call signature is validated once and its
launch cached (``_Prepared``): a repeated call costs a dict lookup, the
allocation of the result and one (split regime: two) kernel launches.
"""
from __future__ import annotations

import math

import numpy

from . import _dispatch, _launch
from ._arrays import analyze_layout, as_cupy, check_out, float_dtype_for, normalize_axes
from ._launch import Launch, capture_guard, device_info, on_device

__all__ = ["softmax_backward", "log_softmax_backward"]

from ._launch import _cupy, _get_device, _ndarray  # noqa: E402  (one CuPy import for all ops)


def result_dtype(y_dtype: numpy.dtype, dy_dtype: numpy.dtype) -> numpy.dtype:
    """dtype of ``dx`` for float ``y`` / ``dy`` dtypes: NumPy promotion (with
    ml_dtypes' bfloat16: bfloat16 with float16 gives float32), from a table."""
    name = _dispatch.backward_result_dtype(y_dtype.name, dy_dtype.name)
    if name == y_dtype.name:
        return y_dtype
    if name == dy_dtype.name:
        return dy_dtype
    return numpy.dtype(name)  # float32 / float64 only


def _c_strides(shape, itemsize):
    out, s = [], itemsize
    for n in reversed(shape):
        out.append(s)
        s *= max(n, 1)
    return tuple(reversed(out))


def _dense_strides(shape, like_strides, itemsize):
    """Strides (bytes) of a dense array whose axes are ordered like
    ``like_strides`` (NumPy's order='K'); C order for ties."""
    order = sorted(range(len(shape)), key=lambda d: (-abs(like_strides[d]), d))
    strides = [0] * len(shape)
    s = itemsize
    for d in reversed(order):
        strides[d] = s
        s *= max(shape[d], 1)
    return tuple(strides)


def _elem_phase(ptr_mod16: int, ptr: int, isz: int, off: int, pack: int) -> int:
    """Element misalignment of an array's first row modulo ``pack`` (-1 if
    the pointer is not even element-aligned)."""
    if ptr % isz:
        return -1
    return (ptr_mod16 // isz + off) % pack


class _Prepared:
    """Everything a call signature needs, computed once."""
    __slots__ = ("kind", "shape", "out_dtype", "out_strides", "c_order", "launch", "args",
                 "offy", "offd", "offx", "y_work", "dy_work", "red_axes", "keep_axes", "inv",
                 "prm")

    def run(self, y, dy, dx):
        yp = y.data.ptr + self.offy
        dp = dy.data.ptr + self.offd
        xp = dx.data.ptr + self.offx
        if self.prm is not None:  # one prebuilt launch: the common case
            _fast3(self.launch, self.prm, yp, dp, xp)
        elif self.kind == "rows":
            _launch_rows(self.launch, yp, dp, xp, *self.args)
        elif self.kind == "cols":
            ln = self.launch
            try:
                ln.fn(ln.grid, ln.block, (yp, dp, xp) + self.args + (numpy.int32(ln.extra[0]),))
            except _CUDA_ERRORS as e:
                O, L, I = self.args[:3]
                raise _failed(ln, e, f"shape (outer {O}, reduced {L}, inner {I})") from e
        else:  # copy: run on contiguous (keep..., red...) copies, then scatter
            order = self.keep_axes + self.red_axes
            yc = _cupy.ascontiguousarray(y.transpose(order))
            dc = _cupy.ascontiguousarray(dy.transpose(order))
            xc = _cupy.empty(yc.shape, self.out_dtype)
            _launch_rows(self.launch, yc.data.ptr, dc.data.ptr, xc.data.ptr, *self.args)
            dx[...] = xc.transpose(self.inv)


_CUDA_ERRORS = getattr(_launch, "_CUDA_ERRORS", ())
# the launcher's prebuilt-argument launch (cuLaunchKernel), when available
_Params = getattr(_launch, "Params", None)
_drv_launch = getattr(_launch, "_drv_launch", None)
_current_stream = getattr(_launch, "_current_stream", None)
_HAS_FAST = None not in (_Params, _drv_launch, _current_stream)


def _fast3(ln: Launch, prm, yp: int, dp: int, xp: int) -> None:
    """One cuLaunchKernel of ``ln``'s main kernel with the prebuilt
    arguments ``prm``, its three pointer slots (y, dy, dx) replaced."""
    gx, gy, gz, bx, by, bz, sm = ln.dims
    stream = _current_stream().ptr
    try:
        with prm.lock:  # the driver copies the arguments before returning
            v = prm.vals
            v[0] = yp
            v[1] = dp
            v[2] = xp
            _drv_launch(ln.fptr, gx, gy, gz, bx, by, bz, sm, stream, prm.addr, 0)
    except _CUDA_ERRORS as e:
        raise _failed(ln, e, prm.describe) from e


def _params(ln: Launch, args, describe: str):
    """Prebuilt arguments (None where the launcher has no fast path)."""
    if not _HAS_FAST or not hasattr(ln, "fptr"):
        return None
    return _Params(args, describe)


def _failed(ln: Launch, err: BaseException, size: str) -> Exception:
    """The launcher's RuntimeError naming operation, kernel and size (when
    the launcher provides one), else the original error."""
    f = getattr(ln, "_failed", None)
    return f(err, size) if f is not None else err


def _launch_rows(ln: Launch, yp, dp, xp, R, L, sy, sd, sx):
    """Rows layout: pointers are byte addresses, strides in elements."""
    try:
        if ln.pre_fn is None:
            ln.fn(ln.grid, ln.block, (yp, dp, xp, R, L, sy, sd, sx) + ln.extra, shared_mem=ln.smem)
        else:  # split: per-block sums into a workspace, then the finishing kernel
            ws = _cupy.empty(ln.ws_elems, ln.ws_dtype)
            ln.pre_fn(ln.pre_grid, ln.block, (yp, dp, ws, R, L, sy, sd) + ln.extra)
            ln.fn(ln.grid, ln.block, (yp, dp, xp, ws, R, L, sy, sd, sx) + ln.extra)
    except _CUDA_ERRORS as e:
        raise _failed(ln, e, f"{R} rows of {L} elements") from e


def _alloc(p: _Prepared):
    if p.c_order:
        return _cupy.empty(p.shape, p.out_dtype)
    nbytes = p.out_dtype.itemsize * math.prod(p.shape)
    return _cupy.ndarray(p.shape, p.out_dtype, _cupy.cuda.alloc(nbytes), p.out_strides)


def _prepare(y, dy, axis, log, out):
    """Validate a call and build its launch (the slow path, once per signature)."""
    if y.shape != dy.shape:
        raise ValueError(f"y and dy must have the same shape, got y {y.shape} and dy {dy.shape}")
    if y.data.device_id != dy.data.device_id:
        raise ValueError(f"y and dy must be on the same device, got y on device {y.data.device_id} "
                         f"and dy on device {dy.data.device_id}")
    ywork = float_dtype_for(y.dtype, "y")
    dwork = float_dtype_for(dy.dtype, "dy")
    odt = result_dtype(ywork, dwork)
    axes = normalize_axes(axis, y.ndim)
    shape = y.shape
    for a in axes:
        if shape[a] == 0:
            raise ValueError(f"cannot take the softmax backward over an empty axis (axis {a} of "
                             f"shape {shape} has length 0)")
    p = _Prepared()
    p.shape, p.out_dtype = shape, odt
    p.y_work, p.dy_work = ywork, dwork
    p.c_order, p.out_strides = True, None
    p.offy = p.offd = p.offx = 0
    p.prm = None
    if ywork != y.dtype or dwork != dy.dtype:
        p.kind = "cast"  # integer input: promote, then rerun on float arrays
        return p
    if y.size == 0:
        p.kind = "empty"
        return p
    isy, isd, isx = y.dtype.itemsize, dy.dtype.itemsize, odt.itemsize
    if out is None:
        if y.flags.c_contiguous or y.ndim <= 1:
            xstrides = _c_strides(shape, isx)
        else:
            p.c_order = False
            xstrides = _dense_strides(shape, y.strides, isx)
            p.out_strides = xstrides
        xptr, xmod = 0, 0  # fresh allocations are 256-byte aligned
    else:
        xstrides = out.strides
        xptr = out.data.ptr
        xmod = xptr & 15
    dev_id = y.data.device_id
    dev = device_info(dev_id)
    ty, td, to = y.dtype.name, dy.dtype.name, odt.name
    lay = None
    if (all(s % isy == 0 for s in y.strides) and all(s % isd == 0 for s in dy.strides)
            and all(s % isx == 0 for s in xstrides)):
        lay = analyze_layout(shape, [[s // isy for s in y.strides], [s // isd for s in dy.strides],
                                     [s // isx for s in xstrides]], set(axes))
    if lay is None:
        p.kind = "copy"
        p.red_axes = axes
        p.keep_axes = tuple(d for d in range(y.ndim) if d not in axes)
        p.inv = tuple(int(i) for i in numpy.argsort(p.keep_axes + p.red_axes))
        R = math.prod(shape[d] for d in p.keep_axes)
        L = math.prod(shape[d] for d in axes)
        # run() passes dense (R, L) arrays: fresh copies (256-byte aligned),
        # or an input itself where its transposed view is already C-contiguous
        # (ascontiguousarray does not copy it), which may start mid-vector
        order = p.keep_axes + p.red_axes
        pack = _dispatch.bwd_pack_width(ty, td, to)

        def phase(a, isz):
            if not a.transpose(order).flags.c_contiguous:
                return 0
            return (a.data.ptr & 15) // isz % pack if a.data.ptr % isz == 0 else -1

        vector_ok = phase(y, isy) == phase(dy, isd) == 0  # == the fresh dx copy's
        mis = R > 1 and L % pack != 0
        plan = _dispatch.plan_backward_rows(R, L, ty, td, to, log, dev, vector_ok, mis)
        p.launch = Launch(plan, dev_id)
        p.args = (R, L, L, L, L)
        return p
    if lay[0] == "rows":
        _, R, L, (sy, sd, sx), (oy, od, ox) = lay
        p.kind = "rows"
        p.offy, p.offd, p.offx = oy * isy, od * isd, ox * isx
        pack = _dispatch.bwd_pack_width(ty, td, to)
        ey = _elem_phase(y.data.ptr & 15, y.data.ptr, isy, oy, pack)
        ed = _elem_phase(dy.data.ptr & 15, dy.data.ptr, isd, od, pack)
        ex = _elem_phase(xmod, xptr, isx, ox, pack)
        same_rows = R == 1 or (sy % pack == sd % pack == sx % pack)
        vector_ok = ey >= 0 and ey == ed == ex and same_rows
        mis = ey != 0 or (R > 1 and sy % pack != 0)
        plan = _dispatch.plan_backward_rows(R, L, ty, td, to, log, dev, vector_ok, mis)
        p.launch = Launch(plan, dev_id)
        p.args = (R, L, sy, sd, sx)
        if plan.pre_kernel is None:
            p.prm = _params(p.launch, (0, 0, 0, R, L, sy, sd, sx) + plan.extra, f"{R} rows of {L} elements")
        return p
    _, O, L, I, (syo, sdo, sxo), (syl, sdl, sxl), (oy, od, ox) = lay
    p.kind = "cols"
    p.offy, p.offd, p.offx = oy * isy, od * isd, ox * isx
    plan = _dispatch.plan_backward_cols(O, L, I, ty, td, to, log, dev)
    p.launch = Launch(plan, dev_id)
    p.args = (O, L, I, syo, syl, sdo, sdl, sxo, sxl)
    p.prm = _params(p.launch, (0, 0, 0) + p.args + (plan.extra[0],),
                    f"shape (outer {O}, reduced {L}, inner {I})")
    return p


_cache: dict = {}
_CACHE_MAX = 4096


def _backward(y, dy, axis, out, log):
    if type(y) is not _ndarray:
        y = as_cupy(y, "y")
    if type(dy) is not _ndarray:
        dy = as_cupy(dy, "dy")
    try:
        key = (y.shape, y.strides, y.dtype, dy.shape, dy.strides, dy.dtype, axis, log,
               y.data.ptr & 15, dy.data.ptr & 15, y.data.device_id, dy.data.device_id,
               None if out is None else (out.strides, out.dtype, out.data.ptr & 15))
        p = _cache.get(key)
    except (TypeError, AttributeError):  # unhashable axis, odd out: slow path
        key, p = None, None
    if p is None:
        if out is not None and not isinstance(out, _ndarray):
            raise TypeError(f"out must be a cupy.ndarray, got {type(out).__name__}")
        p = _prepare(y, dy, axis, log, out)
        if key is not None:
            if len(_cache) >= _CACHE_MAX:
                _cache.clear()
            _cache[key] = p
    dev = y.data.device_id
    if out is None and p.prm is not None and _get_device() == dev:
        # hot path: allocate, one prebuilt launch
        dx = _ndarray(p.shape, p.out_dtype) if p.c_order else _alloc(p)
        _fast3(p.launch, p.prm, y.data.ptr + p.offy, dy.data.ptr + p.offd, dx.data.ptr + p.offx)
        return dx
    if out is not None:
        check_out(out, p.shape, p.out_dtype, dev, (("y", y), ("dy", dy)))
    if p.kind == "cast":
        with capture_guard():
            return _backward(y.astype(p.y_work, copy=False), dy.astype(p.dy_work, copy=False),
                             axis, out, log)
    with on_device(dev), capture_guard():
        dx = _alloc(p) if out is None else out
        if p.kind != "empty":
            p.run(y, dy, dx)
    return dx


def softmax_backward(y, dy, /, axis=-1, *, out=None):
    r"""Gradient of :func:`softmax` with respect to its input.

    ``dx = y * (dy - sum(y * dy, axis))``: the vector-Jacobian product
    ``J^T dy`` with ``J = diag(y) - y y^T``, computed in one kernel that reads
    ``y`` and ``dy`` once and writes ``dx`` once (``y * dy`` is never stored).

    Parameters
    ----------
    y : cupy.ndarray or GPU array
        The forward's output (probabilities). Objects exposing
        ``__cuda_array_interface__`` or ``__dlpack__`` are taken without a
        copy. float16, bfloat16, float32 and float64; integers promote as
        ``numpy.exp`` does.
    dy : cupy.ndarray or GPU array
        Gradient of the loss with respect to ``y``: same shape and device as
        ``y``, any supported dtype.
    axis : int, tuple of ints or None, optional
        Axis or axes the forward normalised over (default ``-1``). ``None``:
        all axes.
    out : cupy.ndarray, optional
        Preallocated result of the right shape, dtype and device. May be
        ``dy`` or ``y`` itself (in place); any other overlap with them raises
        ``ValueError``.

    Returns
    -------
    cupy.ndarray
        ``dx``, of dtype ``numpy.result_type(y.dtype, dy.dtype)`` (bfloat16
        with float16 gives float32), on ``y``'s device (``out`` if given).

    Raises
    ------
    ValueError
        ``y`` and ``dy`` differ in shape or device, an axis is empty or out
        of range, or ``out`` overlaps an input other than exactly.
    TypeError
        Host (NumPy) arrays, bool or complex dtypes, a wrong ``out`` dtype.

    Notes
    -----
    Arithmetic is float32 for 16- and 32-bit types and float64 when any of
    ``y``, ``dy`` or the result is float64. A NaN or infinity in a row's
    ``y * dy`` makes that row NaN, as the formula does.

    Examples
    --------
    >>> import cupy, cusoftmax
    >>> x = cupy.asarray([[1.0, 2.0, 3.0], [1.0, 3.0, 5.0]])
    >>> y = cusoftmax.softmax(x)
    >>> dy = cupy.asarray([[0.1, 0.2, 0.7], [0.2, 0.3, 0.5]])
    >>> cusoftmax.softmax_backward(y, dy).round(4)
    array([[-0.0381, -0.0792,  0.1173],
           [-0.0043, -0.0202,  0.0245]])
    """
    return _backward(y, dy, axis, out, False)


def log_softmax_backward(y, dy, /, axis=-1, *, out=None):
    r"""Gradient of :func:`log_softmax` with respect to its input.

    ``dx = dy - exp(y) * sum(dy, axis)``: the vector-Jacobian product with
    ``J = I - 1 softmax(x)^T``, in one kernel reading ``y`` and ``dy`` once and
    writing ``dx`` once.

    Parameters
    ----------
    y : cupy.ndarray or GPU array
        The forward's output (log-probabilities), see :func:`softmax_backward`.
    dy : cupy.ndarray or GPU array
        Gradient of the loss with respect to ``y``: same shape and device.
    axis : int, tuple of ints or None, optional
        Axis or axes the forward normalised over (default ``-1``).
    out : cupy.ndarray, optional
        Preallocated result; may be ``dy`` or ``y`` itself.

    Returns
    -------
    cupy.ndarray
        ``dx``, of dtype ``numpy.result_type(y.dtype, dy.dtype)``.

    Notes
    -----
    Same rules as :func:`softmax_backward`. ``exp(y)`` is ``ex2.approx`` in
    float32 (about 2 ulp) and correctly rounded to within 1 ulp in float64;
    ``y = -inf`` gives ``dx = dy``.

    Examples
    --------
    >>> import cupy, cusoftmax
    >>> y = cupy.log(cupy.asarray([0.25, 0.25, 0.5]))
    >>> cusoftmax.log_softmax_backward(y, cupy.asarray([1.0, 0.0, 0.0]))
    array([ 0.75, -0.25, -0.5 ])
    """
    return _backward(y, dy, axis, out, True)
