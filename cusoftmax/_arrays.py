"""Input coercion, argument validation and layout analysis (no kernels here).

Everything in this module is pure Python/NumPy except ``as_cupy``, which needs
CuPy only for objects that are already on a GPU, so argument checks run on
machines without one.
"""
from __future__ import annotations

import operator

import numpy

try:  # numpy >= 1.25
    from numpy.exceptions import AxisError
except ImportError:  # pragma: no cover
    from numpy import AxisError  # type: ignore

SUPPORTED = ("float16", "bfloat16", "float32", "float64")

_KDLCUDA, _KDLCUDAHOST, _KDLCUDAMANAGED = 2, 3, 13

_GPU_HINT = ("move it to the GPU first, e.g. cupy.asarray(x) (or pass a CuPy array, or a GPU "
             "tensor exposing __cuda_array_interface__ or __dlpack__)")


def as_cupy(x, name: str = "x"):
    """``x`` as a ``cupy.ndarray`` without copying, or ``TypeError``.

    Accepts CuPy arrays and any GPU object exposing ``__cuda_array_interface__``
    or ``__dlpack__`` (torch, JAX, ...), without importing their libraries.
    """
    import cupy

    if isinstance(x, cupy.ndarray):
        return x
    if isinstance(x, numpy.ndarray) or numpy.isscalar(x) or isinstance(x, (list, tuple)):
        raise TypeError(f"{name} is a {type(x).__name__} in host memory; cusoftmax works on GPU "
                        f"arrays: {_GPU_HINT}")
    # DLPack first: it carries every dtype (torch's __cuda_array_interface__
    # describes bfloat16 as an opaque '|V2'), and it is zero-copy too
    if hasattr(x, "__dlpack__"):
        dev = None
        if hasattr(x, "__dlpack_device__"):
            try:
                dev = x.__dlpack_device__()
            except Exception:  # pragma: no cover - foreign object misbehaving
                dev = None
        if dev is not None and int(dev[0]) not in (_KDLCUDA, _KDLCUDAMANAGED):
            raise TypeError(f"{name} ({type(x).__name__}) lives on a non-CUDA device "
                            f"(DLPack device {tuple(dev)}): {_GPU_HINT}")
        try:
            return cupy.from_dlpack(x)
        except BufferError as e:  # e.g. a torch tensor that requires grad
            if not hasattr(x, "__cuda_array_interface__"):
                raise TypeError(f"{name} ({type(x).__name__}) cannot be exported through DLPack: "
                                f"{e}") from e
            try:
                return cupy.asarray(x)
            except Exception as e2:  # noqa: BLE001 - report both refusals
                raise TypeError(f"{name} ({type(x).__name__}) cannot be shared with CuPy: {e}; "
                                f"{e2}") from e2
    if hasattr(x, "__cuda_array_interface__"):
        return cupy.asarray(x)
    raise TypeError(f"{name} must be a GPU array (cupy.ndarray, or an object with "
                    f"__cuda_array_interface__ / __dlpack__), got {type(x).__name__}: {_GPU_HINT}")


_promote_cache: dict = {}


def float_dtype_for(dt: numpy.dtype, name: str = "x") -> numpy.dtype:
    """The floating dtype the operation runs in for input dtype ``dt``.

    Floating types are kept; integers promote as ``numpy.exp`` does; bool,
    complex and everything else raise ``TypeError``.
    """
    r = _promote_cache.get(dt)
    if r is not None:
        return r
    if dt.name in SUPPORTED:
        r = dt
    elif dt.kind in "iu":
        r = numpy.exp(numpy.zeros(1, dt)).dtype
    elif dt.kind == "b":
        raise TypeError(f"{name} has dtype bool; softmax needs a floating or integer array "
                        "(cast with x.astype(cupy.float32))")
    elif dt.kind == "c":
        raise TypeError(f"{name} has complex dtype {dt}; softmax is defined for real inputs only")
    else:
        raise TypeError(f"{name} has unsupported dtype {dt}; supported: float16, bfloat16, "
                        "float32, float64 and integer types")
    _promote_cache[dt] = r
    return r


def out_dtype_for(work: numpy.dtype, dtype) -> numpy.dtype:
    """Result dtype: ``dtype`` if given (a supported float), else ``work``."""
    if dtype is None:
        return work
    try:
        d = numpy.dtype(dtype)
    except TypeError:
        raise TypeError(f"dtype={dtype!r} is not a dtype; use one of {', '.join(SUPPORTED)}") from None
    if d.name not in SUPPORTED:
        raise TypeError(f"dtype={d} is not supported for the result; use one of {', '.join(SUPPORTED)}")
    return d


def normalize_axes(axis, ndim: int) -> tuple:
    """Sorted tuple of non-negative axes. ``None`` means all axes."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (tuple, list)):
        axes = []
        for a in axis:
            axes.append(_one_axis(a, ndim))
        if len(set(axes)) != len(axes):
            raise ValueError(f"repeated axis in axis={tuple(axis)}")
        return tuple(sorted(axes))
    return (_one_axis(axis, ndim),)


def _one_axis(a, ndim: int) -> int:
    if isinstance(a, (bool, numpy.bool_)):
        raise TypeError(f"axis must be an integer, a tuple of integers or None, got {a!r}")
    try:
        a = operator.index(a)
    except TypeError:
        raise TypeError(f"axis must be an integer, a tuple of integers or None, got {a!r}") from None
    if not -ndim <= a < ndim:
        raise AxisError(a, ndim)
    return a % ndim


def check_algorithm(algorithm, allowed) -> None:
    if algorithm not in allowed:
        raise ValueError(f"algorithm={algorithm!r} is not one of {', '.join(map(repr, allowed))}")


def mem_bounds(a) -> tuple:
    """[lo, hi) byte range an array's elements touch."""
    if a.size == 0:
        return (a.data.ptr, a.data.ptr)
    lo = hi = a.data.ptr
    for n, s in zip(a.shape, a.strides):
        if s > 0:
            hi += (n - 1) * s
        else:
            lo += (n - 1) * s
    return (lo, hi + a.itemsize)


def check_out(out, shape, dtype, device_id, inputs, name="out"):
    """Validate a user ``out=``: type, shape, dtype, device, overlap.

    ``out`` may be exactly one of ``inputs`` (same pointer, shape, strides and
    dtype: in place); any other overlap raises ``ValueError``.
    """
    import cupy

    if not isinstance(out, cupy.ndarray):
        raise TypeError(f"{name} must be a cupy.ndarray, got {type(out).__name__}")
    if out.shape != shape:
        raise ValueError(f"{name} has shape {out.shape}, expected {shape}")
    if out.dtype != dtype:
        raise TypeError(f"{name} has dtype {out.dtype}, expected {dtype}")
    if out.data.device_id != device_id:
        raise ValueError(f"{name} is on device {out.data.device_id}, the input on device {device_id}")
    if out.size and any(st == 0 for st, n in zip(out.strides, out.shape) if n > 1):
        raise ValueError(f"{name} has a zero stride (a broadcast view); it must be writable "
                         "element by element")
    if out.size == 0:
        return
    olo, ohi = mem_bounds(out)
    for nm, a in inputs:
        if a.size == 0:
            continue
        if (a.data.ptr == out.data.ptr and a.strides == out.strides and a.dtype == out.dtype
                and a.shape == out.shape):
            continue  # exactly in place
        lo, hi = mem_bounds(a)
        if lo < ohi and olo < hi:
            raise ValueError(f"{name} overlaps {nm} in memory; only exactly in place "
                             f"({name}={nm}) or non-overlapping outputs are supported")


# ----------------------------------------------------------------------------
# Layout analysis
# ----------------------------------------------------------------------------
def _merge(dims):
    """Merge dims (n, s_0, ..., s_k) -- one stride per array -- into as few as
    possible: sort by |s_0| descending and fold a dim into the previous one
    when it continues it in every array."""
    dims = sorted(dims, key=lambda d: tuple(abs(s) for s in d[1:]), reverse=True)
    out = []
    for d in dims:
        n = d[0]
        if out:
            p = out[-1]
            if all(ps == n * s for ps, s in zip(p[1:], d[1:])):
                out[-1] = (p[0] * n,) + tuple(d[1:])
                continue
        out.append(tuple(d))
    return out


def analyze_layout(shape, strides, axes):
    """Map strided arrays of one shape (``strides``: one tuple of element
    strides per array, e.g. [x, y] or [y, dy, dx]) onto a kernel layout.

    Returns one of
      ("rows", R, L, row_strides, offsets)
      ("cols", O, L, I, outer_strides, l_strides, offsets)
      None  (needs a copy)
    where ``*_strides`` and ``offsets`` have one entry per array. ``offsets``
    are element offsets to add to the base pointers: a reduced axis walked
    backwards in every array is walked forwards from its last element.
    """
    k = len(strides)
    red, keep = [], []
    for d, n in enumerate(shape):
        if n == 1:
            continue
        (red if d in axes else keep).append((n,) + tuple(s[d] for s in strides))
    offs = [0] * k
    fixed = []
    for d in red:
        n, ss = d[0], d[1:]
        if all(s < 0 for s in ss):
            for j, s in enumerate(ss):
                offs[j] += (n - 1) * s
            ss = tuple(-s for s in ss)
        elif any(s < 0 for s in ss):
            return None
        fixed.append((n,) + tuple(ss))
    red = _merge(fixed)
    if len(red) == 0:
        L, ls = 1, (1,) * k
    elif len(red) == 1:
        L, ls = red[0][0], red[0][1:]
    else:
        return None
    keep = _merge(keep)
    offs = tuple(offs)
    if all(s == 1 for s in ls):
        if len(keep) == 0:
            return ("rows", 1, L, (L,) * k, offs)
        if len(keep) == 1:
            return ("rows", keep[0][0], L, keep[0][1:], offs)
        return None
    inner = [d for d in keep if all(s == 1 for s in d[1:])]
    if len(inner) != 1:
        return None
    I = inner[0][0]
    outer = [d for d in keep if d is not inner[0]]
    if len(outer) == 0:
        return ("cols", 1, L, I, (0,) * k, ls, offs)
    if len(outer) == 1:
        return ("cols", outer[0][0], L, I, outer[0][1:], ls, offs)
    return None
