"""Argument validation. The first half needs no GPU (host inputs are rejected
before CUDA is touched; dtype, axis and layout logic is pure Python); the
``gpu``-marked half checks the cases that need device arrays."""
import itertools

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import cusoftmax
from cusoftmax import _arrays, _dispatch
from cusoftmax._arrays import AxisError, analyze_layout, float_dtype_for, normalize_axes, out_dtype_for

from _check import apply_view, base_shape_for, check_forward, finalize_ops, layout_ops, LAYOUTS
from _util import np_dtype

FWD = [cusoftmax.softmax, cusoftmax.log_softmax]
FWD_IDS = ["softmax", "log_softmax"]


# ----------------------------------------------------------------------------
# Host inputs: TypeError that says how to move them to the GPU (no CUDA needed)
# ----------------------------------------------------------------------------
HOST_INPUTS = {
    "numpy": np.ones((2, 3), np.float32),
    "numpy_f64": np.arange(4.0),
    "list": [[1.0, 2.0], [3.0, 4.0]],
    "tuple": (1.0, 2.0),
    "float": 1.5,
    "int": 3,
    "numpy_scalar": np.float32(2.0),
}


@pytest.mark.parametrize("f", FWD, ids=FWD_IDS)
@pytest.mark.parametrize("name", list(HOST_INPUTS))
def test_host_input_raises_typeerror_with_hint(f, name):
    with pytest.raises(TypeError) as ei:
        f(HOST_INPUTS[name])
    msg = str(ei.value)
    assert "cupy.asarray" in msg and "GPU" in msg, msg
    assert msg.startswith("x "), "the message names the argument"


def test_host_input_rejected_before_cuda(monkeypatch):
    """``as_cupy`` raises for host data without touching CUDA: a broken
    runtime would otherwise surface first."""
    import cupy

    def boom(*a, **k):  # pragma: no cover - must not be reached
        raise AssertionError("CUDA touched")

    monkeypatch.setattr(cupy.cuda.runtime, "getDevice", boom)
    with pytest.raises(TypeError, match="host memory"):
        _arrays.as_cupy(np.zeros(3))


def test_object_without_gpu_interface():
    with pytest.raises(TypeError, match="must be a GPU array"):
        cusoftmax.softmax(object())


def test_dlpack_on_cpu_device_rejected():
    class CpuDlpack:
        def __dlpack__(self, **kw):  # pragma: no cover - must not be called
            raise AssertionError("exported")

        def __dlpack_device__(self):
            return (1, 0)  # kDLCPU

    with pytest.raises(TypeError, match="non-CUDA device"):
        cusoftmax.softmax(CpuDlpack())


@pytest.mark.parametrize("opname,args", [
    ("softmax_backward", (np.ones(3), np.ones(3))),
    ("log_softmax_backward", (np.ones(3), np.ones(3))),
    ("softmax_topk", (np.ones(3), 1)),
])
def test_other_ops_reject_host_input(opname, args):
    if not hasattr(cusoftmax, opname):
        pytest.skip(f"cusoftmax.{opname} does not exist yet")
    with pytest.raises(TypeError, match="cupy.asarray"):
        getattr(cusoftmax, opname)(*args)


# ----------------------------------------------------------------------------
# algorithm, dtypes
# ----------------------------------------------------------------------------
@pytest.mark.parametrize("bad", ["fast", "", None, 3, "Online"])
def test_bad_algorithm(bad):
    with pytest.raises(ValueError, match="algorithm="):
        _arrays.check_algorithm(bad, _dispatch.ALGORITHMS)


def test_algorithms_listed():
    assert set(_dispatch.ALGORITHMS) == {"auto", "naive", "safe", "online"}


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64"])
def test_float_dtypes_kept(name):
    assert float_dtype_for(np_dtype(name)) == np_dtype(name)


@pytest.mark.parametrize("name", ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                                  "uint64"])
def test_integers_promote_like_numpy_exp(name):
    dt = np.dtype(name)
    assert float_dtype_for(dt) == np.exp(np.zeros(1, dt)).dtype


@pytest.mark.parametrize("name,match", [
    ("bool", "bool"), ("complex64", "complex"), ("complex128", "complex"), ("object", "unsupported"),
    ("U3", "unsupported"), ("datetime64[s]", "unsupported"), ("S2", "unsupported"),
])
def test_unsupported_dtypes(name, match):
    with pytest.raises(TypeError, match=match) as ei:
        float_dtype_for(np.dtype(name))
    assert str(ei.value).startswith("x ")


def test_result_dtype_argument():
    f32 = np.dtype("float32")
    assert out_dtype_for(np_dtype("bfloat16"), None) == np_dtype("bfloat16")
    assert out_dtype_for(np_dtype("bfloat16"), "float32") == f32
    assert out_dtype_for(f32, np_dtype("bfloat16")) == np_dtype("bfloat16")
    assert out_dtype_for(f32, np.float64) == np.dtype("float64")
    for bad in ("int32", "complex64", bool):
        with pytest.raises(TypeError, match="dtype="):
            out_dtype_for(f32, bad)
    with pytest.raises(TypeError, match="not a dtype"):
        out_dtype_for(f32, "nonsense")


# ----------------------------------------------------------------------------
# axes
# ----------------------------------------------------------------------------
def test_normalize_axes():
    assert normalize_axes(-1, 3) == (2,)
    assert normalize_axes(0, 3) == (0,)
    assert normalize_axes(None, 3) == (0, 1, 2)
    assert normalize_axes(None, 0) == ()
    assert normalize_axes((2, 0), 3) == (0, 2)
    assert normalize_axes((-1, 0), 3) == (0, 2)
    assert normalize_axes([1], 3) == (1,)
    assert normalize_axes(np.int64(1), 2) == (1,)
    assert normalize_axes((), 3) == ()


@pytest.mark.parametrize("axis,ndim", [(3, 3), (-4, 3), ((0, 3), 3), (0, 0), (-1, 0), ((5,), 2)])
def test_axis_out_of_range(axis, ndim):
    with pytest.raises(AxisError):
        normalize_axes(axis, ndim)


@pytest.mark.parametrize("axis", [(0, 0), (1, -2), (0, 1, 0)])
def test_axis_repeated(axis):
    with pytest.raises(ValueError, match="repeated axis"):
        normalize_axes(axis, 3)


@pytest.mark.parametrize("axis", [1.0, "0", True, (0, 1.5), (True,)])
def test_axis_wrong_type(axis):
    with pytest.raises(TypeError, match="axis must be an integer"):
        normalize_axes(axis, 3)


def test_axis_error_is_value_and_index_error():
    # numpy.exceptions.AxisError: callers may catch either
    assert issubclass(AxisError, ValueError) and issubclass(AxisError, IndexError)


# ----------------------------------------------------------------------------
# Layout analysis: stride patterns (pure Python)
# ----------------------------------------------------------------------------
def _strides(shape, ops, itemsize=1):
    base = np.zeros(base_shape_for(shape, ops), dtype=np.int8)
    v = apply_view(base, ops)
    return tuple(s // itemsize for s in v.strides)



@pytest.mark.parametrize("shape,xs,ys,axes,expect", [
    # C order, last axis: R rows of L
    ((4, 5), (5, 1), (5, 1), {1}, ("rows", 4, 5, (5, 5), (0, 0))),
    # sliced x[:, 1:] of a (4, 6) base into a dense out
    ((4, 5), (6, 1), (5, 1), {1}, ("rows", 4, 5, (6, 5), (0, 0))),
    # reversed rows x[::-1]: a negative row stride is fine
    ((4, 5), (-5, 1), (5, 1), {1}, ("rows", 4, 5, (-5, 5), (0, 0))),
    # reduced axis reversed in both arrays: walked forwards from the last element
    ((4, 5), (5, -1), (5, -1), {1}, ("rows", 4, 5, (5, 5), (-4, -4))),
    # reduced axis reversed in one array only: copy
    ((4, 5), (5, -1), (5, 1), {1}, None),
    # trailing axes merged
    ((2, 3, 4), (12, 4, 1), (12, 4, 1), {1, 2}, ("rows", 2, 12, (12, 12), (0, 0))),
    # all axes of a contiguous array: one row
    ((2, 3, 4), (12, 4, 1), (12, 4, 1), {0, 1, 2}, ("rows", 1, 24, (24, 24), (0, 0))),
    # size-1 dims are ignored
    ((1, 5), (5, 1), (5, 1), {0}, ("rows", 5, 1, (1, 1), (0, 0))),
    ((4, 1, 5), (5, 5, 1), (5, 5, 1), {0, 2}, ("rows", 1, 20, (20, 20), (0, 0))),
    # broadcast input (stride 0 rows)
    ((4, 5), (0, 1), (5, 1), {1}, ("rows", 4, 5, (0, 5), (0, 0))),
    # non-last axis of C order: strided reduction, unit-stride inner axis
    ((4, 5), (5, 1), (5, 1), {0}, ("cols", 1, 4, 5, (0, 0), (5, 5), (0, 0))),
    ((2, 3, 4), (12, 4, 1), (12, 4, 1), {1}, ("cols", 2, 3, 4, (12, 12), (4, 4), (0, 0))),
    # Fortran order, last axis
    ((4, 5), (1, 4), (1, 4), {1}, ("cols", 1, 5, 4, (0, 0), (4, 4), (0, 0))),
    ((2, 3, 4), (1, 2, 6), (1, 2, 6), {2}, ("cols", 1, 4, 6, (0, 0), (6, 6), (0, 0))),
    # non-mergeable reduced axes (0 and 2): copy
    ((2, 3, 4), (12, 4, 1), (12, 4, 1), {0, 2}, None),
    # strided inner axis (x[..., ::2] reduced over axis 0): no unit-stride axis: copy
    ((3, 4), (8, 2), (4, 1), {0}, None),
])
def test_analyze_layout_patterns(shape, xs, ys, axes, expect):
    assert analyze_layout(shape, [xs, ys], axes) == expect


def _rows_of_original(shape, strides_list, axes):
    """{keep index: frozenset of (offset in each array) per reduced index}."""
    keep = [d for d in range(len(shape)) if d not in axes]
    red = [d for d in range(len(shape)) if d in axes]
    rows = []
    for kidx in itertools.product(*[range(shape[d]) for d in keep]):
        elems = []
        for ridx in itertools.product(*[range(shape[d]) for d in red]):
            idx = [0] * len(shape)
            for d, i in zip(keep, kidx):
                idx[d] = i
            for d, i in zip(red, ridx):
                idx[d] = i
            elems.append(tuple(sum(i * s for i, s in zip(idx, st)) for st in strides_list))
        rows.append(frozenset(elems))
    return sorted(rows, key=lambda r: sorted(r))


def _rows_of_layout(lay, k):
    rows = []
    if lay[0] == "rows":
        _, R, L, rs, offs = lay
        for r in range(R):
            rows.append(frozenset(tuple(offs[j] + r * rs[j] + l for j in range(k)) for l in range(L)))
    else:
        _, O, L, I, os_, ls, offs = lay
        for o in range(O):
            for i in range(I):
                rows.append(frozenset(tuple(offs[j] + o * os_[j] + l * ls[j] + i for j in range(k))
                                      for l in range(L)))
    return sorted(rows, key=lambda r: sorted(r))


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_analyze_layout_is_exact(data):
    """Whatever layout the analyser returns addresses exactly the original
    rows, element for element in every array (brute force over small views)."""
    ndim = data.draw(st.integers(1, 4))
    shape = tuple(data.draw(st.lists(st.integers(0, 4), min_size=ndim, max_size=ndim)))
    strides = []
    for _ in range(2):
        name = data.draw(st.sampled_from(LAYOUTS))
        ops = finalize_ops(layout_ops(name, ndim, lambda lo, hi: data.draw(st.integers(lo, hi))), shape)
        strides.append(_strides(shape, ops))
    axes = set(data.draw(st.sets(st.integers(0, ndim - 1), min_size=1)))
    lay = analyze_layout(shape, strides, axes)
    if lay is None or 0 in shape:
        return
    assert _rows_of_layout(lay, 2) == _rows_of_original(shape, strides, axes)


def test_analyze_layout_contiguous_never_copies():
    for shape in [(3,), (3, 4), (2, 3, 4), (2, 1, 3, 4)]:
        st_ = tuple(int(s) for s in np.zeros(shape, np.int8).strides)
        for ax in range(len(shape)):
            assert analyze_layout(shape, [st_, st_], {ax}) is not None, (shape, ax)


# ----------------------------------------------------------------------------
# GPU argument checks
# ----------------------------------------------------------------------------
def _x(shape=(4, 5), dtype="float32", seed=0):
    import cupy
    return cupy.asarray(np.random.default_rng(seed).standard_normal(shape).astype(np_dtype(dtype)))


@pytest.mark.gpu
@pytest.mark.parametrize("f", FWD, ids=FWD_IDS)
def test_gpu_bad_algorithm(f):
    with pytest.raises(ValueError, match="algorithm="):
        f(_x(), algorithm="fastest")


@pytest.mark.gpu
@pytest.mark.parametrize("f", FWD, ids=FWD_IDS)
@pytest.mark.parametrize("shape,axis", [((4, 0), -1), ((0,), -1), ((3, 0, 2), 1), ((3, 0, 2), None),
                                        ((3, 0, 2), (0, 1))])
def test_empty_reduced_axis_raises(f, shape, axis):
    import cupy
    with pytest.raises(ValueError, match="empty axis"):
        f(cupy.zeros(shape, cupy.float32), axis=axis)


@pytest.mark.gpu
@pytest.mark.parametrize("f", FWD, ids=FWD_IDS)
@pytest.mark.parametrize("shape,axis", [((0, 5), -1), ((3, 0, 2), 2), ((0, 4), (1,))])
def test_empty_non_reduced_axis_returns_empty(f, shape, axis):
    import cupy
    x = cupy.zeros(shape, cupy.float16)
    y = f(x, axis=axis)
    assert isinstance(y, cupy.ndarray) and y.shape == shape and y.dtype == cupy.float16
    y2 = f(x, axis=axis, dtype="float32")
    assert y2.dtype == cupy.float32
    out = cupy.zeros(shape, cupy.float16)
    assert f(x, axis=axis, out=out) is out


@pytest.mark.gpu
def test_zero_dim_axis_none():
    import cupy
    x = cupy.asarray(np.float32(3.5))
    y = cusoftmax.softmax(x, axis=None)
    assert y.shape == () and y.dtype == cupy.float32 and float(y) == 1.0
    assert float(cusoftmax.log_softmax(x, axis=None)) == 0.0
    with pytest.raises(AxisError):
        cusoftmax.softmax(x)  # axis=-1 does not exist on a 0-d array


@pytest.mark.gpu
@pytest.mark.parametrize("f", FWD, ids=FWD_IDS)
def test_out_checks(f):
    import cupy
    x = _x((4, 5))
    with pytest.raises(ValueError, match=r"out has shape \(5, 4\)"):
        f(x, out=cupy.empty((5, 4), cupy.float32))
    with pytest.raises(TypeError, match="out has dtype float64"):
        f(x, out=cupy.empty((4, 5), cupy.float64))
    with pytest.raises(TypeError, match="out must be a cupy.ndarray"):
        f(x, out=np.empty((4, 5), np.float32))
    # dtype= sets the result dtype that out must have
    with pytest.raises(TypeError, match="out has dtype float32"):
        f(x, dtype="float64", out=cupy.empty((4, 5), cupy.float32))
    out = cupy.empty((4, 5), cupy.float64)
    assert f(x, dtype="float64", out=out) is out


@pytest.mark.gpu
@pytest.mark.parametrize("f", FWD, ids=FWD_IDS)
def test_out_overlapping_input_raises(f):
    import cupy
    base = _x((4, 6))
    with pytest.raises(ValueError, match="overlaps x"):
        f(base[:, :5], out=base[:, 1:])
    x = base[:, :5]
    with pytest.raises(ValueError, match="overlaps x"):
        f(x, out=x[::-1])
    with pytest.raises(ValueError, match="overlaps x"):
        f(base, out=base.reshape(6, 4).T)  # same memory, other shape mapping
    flat = _x((40,))
    with pytest.raises(ValueError, match="overlaps x"):
        f(flat[:20].reshape(4, 5), out=flat[10:30].reshape(4, 5))


@pytest.mark.gpu
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("view", ["c", "slice1", "neg", "f"])
def test_in_place(log, view):
    import cupy
    f = cusoftmax.log_softmax if log else cusoftmax.softmax
    ops = finalize_ops(layout_ops(view, 2, lambda lo, hi: lo), (6, 37))
    base_h = np.random.default_rng(3).standard_normal(base_shape_for((6, 37), ops)).astype(np.float32)
    x = apply_view(cupy.asarray(base_h), ops)
    xh = apply_view(base_h, ops).copy()
    y = f(x, out=x)
    assert y is x
    check_forward(x, xh, -1, log, ctx=f"in place {view}")


@pytest.mark.gpu
def test_zero_stride_out_rejected():
    import cupy
    x = _x((4, 5))
    out = cupy.broadcast_to(cupy.empty((5,), cupy.float32), (4, 5))
    with pytest.raises(ValueError, match="zero stride"):
        cusoftmax.softmax(x, out=out)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["int8", "uint8", "int16", "int32", "int64", "uint32"])
def test_integer_input_matches_cupyx_dtype(name):
    import cupy
    sp = pytest.importorskip("cupyx.scipy.special")
    if not hasattr(sp, "softmax"):
        pytest.skip("cupyx.scipy.special.softmax is missing in this CuPy")
    xh = np.random.default_rng(4).integers(-5 if name[0] == "i" else 0, 10, (3, 7)).astype(name)
    x = cupy.asarray(xh)
    y = cusoftmax.softmax(x)
    expect = sp.softmax(x, axis=-1)
    assert y.dtype == expect.dtype == np.exp(xh).dtype
    check_forward(y, xh.astype(y.dtype), -1, False, ctx=name)
    yl = cusoftmax.log_softmax(x)
    assert yl.dtype == y.dtype
    check_forward(yl, xh.astype(y.dtype), -1, True, ctx=name)


@pytest.mark.gpu
@pytest.mark.parametrize("f", FWD, ids=FWD_IDS)
@pytest.mark.parametrize("bad", ["bool", "complex64", "complex128"])
def test_gpu_unsupported_dtypes(f, bad):
    import cupy
    with pytest.raises(TypeError, match="bool|complex"):
        f(cupy.zeros((2, 3), bad))


@pytest.mark.gpu
@pytest.mark.parametrize("f", FWD, ids=FWD_IDS)
@pytest.mark.parametrize("din,dout", [("bfloat16", "float32"), ("float16", "float32"),
                                      ("float32", "bfloat16"), ("float16", "float64"),
                                      ("float64", "float16"), ("bfloat16", "float16")])
def test_dtype_argument(f, din, dout):
    log = f is cusoftmax.log_softmax
    xh = (np.random.default_rng(5).standard_normal((5, 300)) * 4).astype(np_dtype(din))
    import cupy
    y = f(cupy.asarray(xh), dtype=np_dtype(dout))
    assert y.dtype == np_dtype(dout)
    check_forward(y, xh, -1, log, out_dtype=dout, ctx=f"{din}->{dout}")


@pytest.mark.gpu
def test_out_on_other_device_raises():
    import cupy
    if cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs 2 GPUs")
    x = _x((4, 5))
    with cupy.cuda.Device(1):
        out = cupy.empty((4, 5), cupy.float32)
    with pytest.raises(ValueError, match="device"):
        cusoftmax.softmax(x, out=out)
