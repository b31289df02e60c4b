"""Fused softmax + top-k: ``softmax_topk`` (thin layer over kernels/topk.cu).

The public function validates a call once per signature (shape, strides,
dtype, k, axis, flags, device) and caches a ``_Prepared`` entry holding the
plan and the compiled kernels, so a repeated call costs a dict lookup, two
allocations and one or two launches. The regimes are described in
``cusoftmax._dispatch`` (section "top-k").
"""
from __future__ import annotations

import math
import operator
from typing import Any, NamedTuple

import numpy

from . import _dispatch
from ._arrays import _one_axis, analyze_layout, as_cupy, check_algorithm, float_dtype_for, out_dtype_for
from ._launch import Params, capture_guard, device_info, on_device, zeroed_workspace
from ._loader import get_kernel

__all__ = ["softmax_topk", "TopK"]

from ._launch import _cupy, _current_stream, _drv_launch, _get_device, _ndarray  # noqa: E402

#: Dynamic shared memory above this needs an opt-in (48 KB less the kernels'
#: static shared memory, with margin).
_BIG_SMEM = 40 * 1024


class TopK(NamedTuple):
    """Result of :func:`softmax_topk`."""
    values: Any
    """The k largest (log-)probabilities along the axis, best first."""
    indices: Any
    """Their int64 positions along the axis."""


def _check_k(k, n: int) -> int:
    """``k`` as an int with ``0 <= k <= n``, or TypeError / ValueError."""
    if isinstance(k, (bool, numpy.bool_)):
        raise TypeError(f"k must be an integer with 0 <= k <= {n} (the length of the axis), "
                        f"got the bool {k!r}")
    try:
        k = operator.index(k)
    except TypeError:
        raise TypeError(f"k must be an integer with 0 <= k <= {n} (the length of the axis), "
                        f"got {type(k).__name__} {k!r}") from None
    if not 0 <= k <= n:
        raise ValueError(f"k={k} is out of range: need 0 <= k <= {n} (the length of the axis)")
    return k


def _check_k_type(k):
    """The type half of ``_check_k`` (before the axis length is known)."""
    if isinstance(k, (bool, numpy.bool_)):
        raise TypeError(f"k must be an integer, got the bool {k!r}")
    try:
        return operator.index(k)
    except TypeError:
        raise TypeError(f"k must be an integer, got {type(k).__name__} {k!r}") from None


def _topk_axis(axis, ndim: int):
    """``None`` (flatten) or a non-negative axis; AxisError / TypeError."""
    if axis is None:
        return None
    if isinstance(axis, (tuple, list)):
        raise TypeError(f"axis must be an integer or None for softmax_topk, got {axis!r}")
    return _one_axis(axis, ndim)


class _Prepared:
    """Everything a call signature needs, computed once."""
    __slots__ = ("kind", "R", "L", "k", "odt", "work", "out_shape", "moved_shape", "axis",
                 "copy", "offx", "sx", "plan", "fn", "merge_fn", "gather_fn", "log", "code",
                 "gather_grid", "md_dtype", "dev", "fast", "fptr", "dims", "ws_bytes", "ws_offs")

    # -- launches ------------------------------------------------------------
    def run_fast(self, x):
        """One direct cuLaunchKernel with prebuilt arguments (one-launch
        plans on rows taken straight from x, results in x's layout): the
        per-call pointers go into their slots, nothing else is converted."""
        vals = _cupy.empty(self.out_shape, self.odt)
        idx = _cupy.empty(self.out_shape, numpy.int64)
        prm = self.fast
        stream = _current_stream().ptr
        gx, gy, gz, bx, by, bz, sm = self.dims
        if self.ws_bytes:  # seg
            wk, wv, wm, cnt, ws = self._seg_workspace(stream)
        with prm.lock:  # the driver copies the arguments before returning
            v = prm.vals
            v[0] = x.data.ptr + self.offx
            v[1] = vals.data.ptr
            v[2] = idx.data.ptr
            if self.ws_bytes:
                v[3], v[4], v[5], v[6] = wk, wv, wm, cnt
            _drv_launch(self.fptr, gx, gy, gz, bx, by, bz, sm, stream, prm.addr, 0)
        return vals, idx

    def _seg_workspace(self, stream: int):
        """topk_seg's workspace: (segment maxima, their seconds, (m, d)
        partials, row counters) pointers and the allocation behind the first
        three, to hold until the launch is queued."""
        with capture_guard():
            ws = _cupy.empty(self.ws_bytes, numpy.uint8)
        wk = ws.data.ptr
        ov, om = self.ws_offs
        cnt = zeroed_workspace(self.dev, stream, "topk_seg", 4 * max(1024, self.R))
        return wk, wk + ov, wk + om, cnt, ws

    def _rows_input(self, x):
        """(pointer, row stride, holder) of x as R contiguous rows of L."""
        if not self.copy:
            return x.data.ptr + self.offx, self.sx, x
        if self.axis is None:
            xc = _cupy.ascontiguousarray(x).reshape(self.R, self.L)
        else:
            xc = _cupy.ascontiguousarray(_cupy.moveaxis(x, self.axis, -1)).reshape(self.R, self.L)
        return xc.data.ptr, self.L, xc

    def _x2d(self, x, xp, sx, holder):
        """x as an (R, L) CuPy view (for cusoftmax.softmax)."""
        if holder is not x:
            return holder
        isz = x.dtype.itemsize
        mem = _cupy.cuda.MemoryPointer(x.data.mem, xp - x.data.mem.ptr)
        return _cupy.ndarray((self.R, self.L), x.dtype, mem, (sx * isz, isz))

    def _select(self, xp, sx, vals, idx, vptr):
        """Stream kernel (+ merge of a split): results into vals / idx."""
        p, R = self.plan, self.R
        wsk = wsm = None
        wk = wm = 0
        if p.regime == "csm":
            self.fn(p.grid, p.block, (xp, vptr, idx.data.ptr, self.L, sx, self.k, p.pps, self.code, self.log),
                    shared_mem=p.smem)
            return
        if p.seg_packs:  # one launch
            wk, wv, wm, cnt, ws = self._seg_workspace(_current_stream().ptr)
            self.fn(p.grid, p.block, (xp, vptr, idx.data.ptr, wk, wv, wm, cnt, self.L, sx, self.k, p.kp,
                                      p.seg_packs, p.seg_per_block, self.code, self.log))
            return
        if p.splits > 1:
            wsk = _cupy.empty(R * p.splits * p.kp * p.cand_bytes, numpy.uint8)
            wsm = _cupy.empty(2 * R * p.splits, self.md_dtype)
            wk, wm = wsk.data.ptr, wsm.data.ptr
        self.fn(p.grid, p.block, (xp, vptr, idx.data.ptr, wk, wm, R, self.L, sx, self.k, p.kp,
                                  p.inc, int(p.block_lists), p.pps, self.code, self.log),
                shared_mem=p.smem)
        if p.splits > 1:
            self.merge_fn(p.merge_grid, p.merge_block, (wk, wm, vptr, idx.data.ptr, R, self.k, p.kp,
                                                        p.splits, self.code, self.log),
                          shared_mem=p.merge_smem)

    def _gather(self, y, idx, vals):
        self.gather_fn(self.gather_grid, (_dispatch.TOPK_AUX_THREADS,),
                       (y.data.ptr, idx.data.ptr, vals.data.ptr, self.R, self.L, self.k))

    def run(self, x):
        from ._api import _forward

        R, k = self.R, self.k
        vals = _cupy.empty((R, k), self.odt)
        idx = _cupy.empty((R, k), numpy.int64)
        xp, sx, holder = self._rows_input(x)
        p = self.plan
        if self.kind == "fused":
            self._select(xp, sx, vals, idx, vals.data.ptr)
        elif self.kind == "unfused":
            y = _forward(self._x2d(x, xp, sx, holder), -1, self.odt, None, p.softmax_algorithm,
                         bool(self.log))
            y = _cupy.ascontiguousarray(y)
            self._select(xp, sx, vals, idx, 0)
            self._gather(y, idx, vals)
        else:  # sort: stable argsort of the ranking keys, values from the softmax
            keys = _cupy.empty((R, self.L), p.key_dtype)
            self.fn(p.grid, p.block, (xp, keys.data.ptr, R, self.L, sx))
            idx[...] = _cupy.argsort(keys, axis=1)[:, :k]
            del keys
            y = _forward(self._x2d(x, xp, sx, holder), -1, self.odt, None, p.softmax_algorithm,
                         bool(self.log))
            self._gather(_cupy.ascontiguousarray(y), idx, vals)
        return self._shape(vals), self._shape(idx)

    def _shape(self, a):
        a = a.reshape(self.moved_shape)
        if self.axis is not None and self.axis != len(self.moved_shape) - 1:
            a = _cupy.ascontiguousarray(_cupy.moveaxis(a, -1, self.axis))
        return a


def _kernel(name: str, device_id: int, smem: int = 0):
    fn = get_kernel(_dispatch.TOPK_SOURCE, name, device_id)
    # dynamic + static shared memory over 48 KB needs the opt-in
    if smem and (smem > _BIG_SMEM or smem + getattr(fn, "shared_size_bytes", 48 * 1024) > 48 * 1024) \
            and fn.max_dynamic_shared_size_bytes < smem:
        fn.max_dynamic_shared_size_bytes = smem
    return fn


def _prepare(x, k, axis, log, dtype, algorithm):
    """Validate a call and build its launches (the slow path, once per signature)."""
    check_algorithm(algorithm, _dispatch.TOPK_ALGORITHMS)
    work = float_dtype_for(x.dtype)
    odt = out_dtype_for(work, dtype)
    ax = _topk_axis(axis, x.ndim)
    shape = x.shape
    L = math.prod(shape) if ax is None else shape[ax]
    k = _check_k(k, L)
    p = _Prepared()
    p.k, p.L, p.odt, p.work, p.axis = k, L, odt, work, ax
    p.log, p.code = int(bool(log)), _dispatch.TOPK_OUT_CODE[odt.name]
    if ax is None:
        p.out_shape = p.moved_shape = (k,)
        p.R = 1
    else:
        keep = shape[:ax] + shape[ax + 1:]
        p.out_shape = shape[:ax] + (k,) + shape[ax + 1:]
        p.moved_shape = keep + (k,)
        p.R = math.prod(keep)
    if work != x.dtype:
        p.kind = "cast"  # integer input: promote, then rerun on the float array
        return p
    if k == 0 or p.R == 0:
        p.kind = "empty"
        return p
    # rows layout straight from x, or a contiguous (keep..., axis) copy
    isz = x.dtype.itemsize
    p.copy, p.offx, p.sx = True, 0, L
    if x.data.ptr % isz == 0 and all(s % isz == 0 for s in x.strides):
        xs = [s // isz for s in x.strides]
        if ax is None:
            if x.flags.c_contiguous:
                p.copy = False
        else:
            # the kernel writes (R, k) in the C order of the kept axes: require
            # x's rows to follow that order (virtual output strides below)
            vs, acc = [0] * x.ndim, k
            for d in reversed(range(x.ndim)):
                if d == ax:
                    vs[d] = 1
                else:
                    vs[d] = acc
                    acc *= shape[d]
            lay = analyze_layout(shape, [xs, vs], {ax})
            if (lay is not None and lay[0] == "rows" and lay[4] == (0, 0)
                    and (lay[1] == 1 or lay[3][1] == k)):
                p.copy, p.offx, p.sx = False, 0, lay[3][0]
    dev = x.data.device_id
    info = device_info(dev)
    plan = _dispatch.plan_topk(p.R, L, k, x.dtype.name, odt.name, info, algorithm)
    p.plan = plan
    p.kind = {"sort": "sort", "unfused": "unfused"}.get(plan.regime, "fused")
    p.fn = _kernel(plan.kernel, dev, plan.smem)
    p.merge_fn = _kernel(plan.merge_kernel, dev, plan.merge_smem) if plan.merge_kernel else None
    p.gather_fn = _kernel(plan.gather_kernel, dev) if plan.gather_kernel else None
    p.md_dtype = numpy.dtype(plan.compute_dtype)
    p.dev = dev
    _seg_layout(p)
    p.fast = _fast_params(p)
    p.gather_grid = _dispatch.topk_aux_grid(p.R * k, info)
    return p


def _seg_layout(p: _Prepared) -> None:
    """``p.ws_bytes`` (0 but for topk_seg) and ``p.ws_offs``: topk_seg's
    workspace holds 2 x R x TOPK_SEG_WCAP candidates (each segment's best,
    then its second), then R x TOPK_SEG_WCAP bounds (offset ws_offs[0]), then
    R x splits (m, d) partials (ws_offs[1])."""
    plan = p.plan
    p.ws_bytes = 0
    if plan.seg_packs:
        wcap, csz = _dispatch.TOPK_SEG_WCAP, p.md_dtype.itemsize
        ov = 2 * p.R * wcap * plan.cand_bytes
        p.ws_offs = (ov, ov + p.R * wcap * csz)
        p.ws_bytes = p.ws_offs[1] + 2 * p.R * plan.splits * csz


def _fast_params(p: _Prepared):
    """Prebuilt arguments of ``run_fast`` (None where it does not apply: two
    launches, a copied or moved layout, no direct launch). Sets ``p.dims``
    and ``p.fptr``."""
    plan = p.plan
    fn = getattr(p.fn, "kernel", None)
    if (p.kind != "fused" or p.copy or _drv_launch is None or fn is None
            or (plan.splits > 1 and not plan.seg_packs) or p.out_shape != p.moved_shape):
        return None
    g = tuple(plan.grid) + (1, 1)
    b = tuple(plan.block) + (1, 1)
    p.dims = (g[0], g[1], g[2], b[0], b[1], b[2], plan.smem)
    if plan.regime == "csm":
        args = (0, 0, 0, p.L, p.sx, p.k, plan.pps, p.code, p.log)
    elif plan.seg_packs:
        args = (0, 0, 0, 0, 0, 0, 0, p.L, p.sx, p.k, plan.kp, plan.seg_packs, plan.seg_per_block, p.code,
                p.log)
    else:
        args = (0, 0, 0, 0, 0, p.R, p.L, p.sx, p.k, plan.kp, plan.inc, int(plan.block_lists), plan.pps,
                p.code, p.log)
    p.fptr = fn.ptr
    return Params(args)


_cache: dict = {}
_CACHE_MAX = 4096


def softmax_topk(x, k, /, axis=-1, *, log=False, dtype=None, algorithm="auto") -> TopK:
    r"""The ``k`` most probable entries of ``softmax(x)`` along ``axis``.

    Fuses the softmax with the top-k selection (Milakov & Gimelshein 2018,
    https://arxiv.org/abs/1805.02867, Algorithm 4): the logits are read once,
    their running (max, sum) and the k best candidates are kept on chip, and
    only the k selected probabilities are computed. The full softmax is never
    written. The top-k of softmax(x) is the top-k of x, so ranking is done on
    the logits in the compute type.

    Parameters
    ----------
    x : cupy.ndarray or GPU array
        Logits. Objects exposing ``__cuda_array_interface__`` or ``__dlpack__``
        are taken without a copy. float16, bfloat16, float32 and float64;
        integers promote as ``numpy.exp`` does.
    k : int
        How many entries to return, ``0 <= k <= x.shape[axis]`` (``k = 0``
        gives empty results). Booleans are not accepted.
    axis : int or None, optional
        Axis to normalise and select along (default ``-1``). ``None``: the
        flattened array.
    log : bool, optional
        Return log-probabilities (``x - max - log(sum(exp(x - max)))``)
        instead of probabilities.
    dtype : dtype, optional
        dtype of ``values`` (a float type). Default: the input's float type.
    algorithm : {"auto", "online", "safe", "unfused"}, optional
        ``"auto"`` (default) and ``"online"``: fused, one read of ``x``.
        ``"safe"``: fused, the row max first, then a second read for the sum
        and the selection. ``"unfused"``: ``cusoftmax.softmax(...,
        algorithm="safe")`` written to a temporary, then a separate selection
        and a gather. The last two reproduce the paper's baselines. For
        ``k > 1024`` every algorithm sorts the row (``cupy.argsort`` of the
        ranking keys) and gathers from a softmax temporary: correct, not one
        read.

    Returns
    -------
    TopK
        Named tuple ``(values, indices)``. Both have ``x``'s shape with
        ``axis`` replaced by ``k`` (shape ``(k,)`` for ``axis=None``),
        C-contiguous. ``values``: the (log-)probabilities normalised over the
        whole axis, best first; ``indices``: int64 positions along ``axis``.

    Notes
    -----
    Ties go to the lower index, so results are deterministic and do not
    depend on the batch size or the kernel. -inf logits have probability 0
    and rank by index among themselves. A row holding a NaN gets NaN values,
    and its NaN logits rank last; a row holding +inf gets NaN values (the
    softmax rule) and +inf ranks first. A non-last axis or a layout whose rows
    are not contiguous is first copied into contiguous rows.

    Examples
    --------
    >>> import cupy, cusoftmax
    >>> x = cupy.asarray([[1.0, 3.0, 2.0, 3.0], [0.0, -1.0, 5.0, 1.0]])
    >>> v, i = cusoftmax.softmax_topk(x, 2)
    >>> i
    array([[1, 3],
           [2, 3]])
    >>> v.round(4)
    array([[0.4223, 0.4223],
           [0.9756, 0.0179]])
    """
    if type(x) is not _ndarray:
        x = as_cupy(x)
    if type(k) is not int:
        k = _check_k_type(k)
    try:
        key = (x.shape, x.strides, x.dtype, k, axis, bool(log), dtype, algorithm, x.data.ptr & 15,
               x.data.device_id)
        p = _cache.get(key)
    except TypeError:  # unhashable axis / dtype: slow path
        key, p = None, None
    if p is None:
        p = _prepare(x, k, axis, log, dtype, algorithm)
        if key is not None:
            if len(_cache) >= _CACHE_MAX:
                _cache.clear()
            _cache[key] = p
    if p.kind == "cast":
        with capture_guard():
            return softmax_topk(x.astype(p.work), k, axis=axis, log=log, dtype=dtype,
                                algorithm=algorithm)
    if p.kind == "empty":
        return TopK(_cupy.empty(p.out_shape, p.odt), _cupy.empty(p.out_shape, numpy.int64))
    dev = x.data.device_id
    if p.fast is not None and _get_device() == dev:
        return TopK(*p.run_fast(x))
    with on_device(dev), capture_guard():
        vals, idx = p.run(x)
    return TopK(vals, idx)
