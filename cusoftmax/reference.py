"""Float64 NumPy reference for every public operation.

Shared by the tests and the benchmarks: every kernel is checked against these
functions, never against itself. Inputs may be NumPy or CuPy arrays (CuPy
arrays are copied to the host); results are float64 NumPy arrays.

Special values follow the library's documented rules: a NaN or +inf anywhere
in a row makes the row NaN, a row of all -inf is NaN, a -inf element is 0
(log: -inf) in an otherwise finite row. (``scipy.special.log_softmax`` differs
for +inf: it returns -inf/NaN instead of an all-NaN row.)
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["softmax", "log_softmax", "softmax_backward", "log_softmax_backward",
           "softmax_topk", "TopK", "to_float64"]


def to_float64(a) -> np.ndarray:
    """``a`` as a float64 NumPy array (CuPy arrays are copied to the host)."""
    if hasattr(a, "get") and not isinstance(a, np.ndarray):
        a = a.get()
    a = np.asarray(a)
    if a.dtype.name == "bfloat16":
        a = a.astype(np.float32)
    return a.astype(np.float64)


def _axes(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (tuple, list)):
        return tuple(a % ndim for a in axis)
    return (axis % ndim,) if ndim else ()


def _rowwise_max(x, axes):
    with np.errstate(invalid="ignore"):
        return np.max(x, axis=axes, keepdims=True) if x.ndim else x


def _sum(a, axes):
    """Sum over ``axes`` (kept as length-1 axes) by NumPy's pairwise
    summation: the reduced axes are moved last and made contiguous first. A
    NumPy sum along a strided axis adds sequentially, which over 67583
    float64 terms already errs by ~1e-13 relative: more than the kernels."""
    if a.ndim == 0 or not axes:
        return np.sum(a, axis=axes, keepdims=True)
    keep = [d for d in range(a.ndim) if d not in axes]
    n = 1
    for d in axes:
        n *= a.shape[d]
    t = np.ascontiguousarray(np.transpose(a, keep + list(axes)))
    s = np.sum(t.reshape(tuple(a.shape[d] for d in keep) + (n,)), axis=-1)
    return s.reshape(tuple(1 if d in axes else a.shape[d] for d in range(a.ndim)))


def softmax(x, axis=-1) -> np.ndarray:
    """Reference softmax in float64: exp(x - max) / sum(exp(x - max))."""
    x = to_float64(x)
    axes = _axes(axis, x.ndim)
    m = _rowwise_max(x, axes)
    with np.errstate(invalid="ignore", over="ignore"):
        e = np.exp(x - m)
        return e / _sum(e, axes)


def log_softmax(x, axis=-1) -> np.ndarray:
    """Reference log-softmax in float64: x - max - log(sum(exp(x - max)))."""
    x = to_float64(x)
    axes = _axes(axis, x.ndim)
    m = _rowwise_max(x, axes)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        t = x - m
        return t - np.log(_sum(np.exp(t), axes))


def softmax_backward(y, dy, axis=-1) -> np.ndarray:
    """Reference softmax backward: dx = y * (dy - sum(y * dy))."""
    y, dy = to_float64(y), to_float64(dy)
    axes = _axes(axis, y.ndim)
    return y * (dy - _sum(y * dy, axes))


def log_softmax_backward(y, dy, axis=-1) -> np.ndarray:
    """Reference log-softmax backward: dx = dy - exp(y) * sum(dy)."""
    y, dy = to_float64(y), to_float64(dy)
    axes = _axes(axis, y.ndim)
    return dy - np.exp(y) * _sum(dy, axes)


class TopK(NamedTuple):
    values: np.ndarray
    indices: np.ndarray


def softmax_topk(x, k, axis=-1, log=False) -> TopK:
    """Reference fused softmax + top-k.

    Ranks by the logits, descending, the lower index first among equals, NaN
    logits last; values are the (log-)probabilities normalised over the whole
    row. ``axis=None`` works on the flattened array.
    """
    x = to_float64(x)
    if axis is None:
        x = x.reshape(-1)
        axis = 0
    axis = axis % max(x.ndim, 1)
    xm = np.moveaxis(x, axis, -1)
    n = xm.shape[-1]
    p = (log_softmax if log else softmax)(xm, axis=-1)
    flat = xm.reshape(-1, n)
    nan = np.isnan(flat)
    key = np.where(nan, 0.0, -flat)
    idx = np.arange(n)
    order = np.empty(flat.shape, dtype=np.int64)
    for r in range(flat.shape[0]):
        order[r] = np.lexsort((idx, key[r], nan[r]))
    order = order[:, :k].reshape(xm.shape[:-1] + (k,))
    vals = np.take_along_axis(p, order, axis=-1)
    return TopK(np.moveaxis(vals, -1, axis), np.moveaxis(order, -1, axis))
