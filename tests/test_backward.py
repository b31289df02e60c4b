"""softmax_backward / log_softmax_backward.

GPU tests (``@pytest.mark.gpu``):
* the issue's worked example; the explicit Jacobian (dx = J^T dy) for small
  rows; central finite differences of the float64 forward reference around
  the library's own forward output (the backward is its VJP);
* hypothesis: shapes at and +-1 around every point where the backward
  dispatcher changes kernel (found by scanning ``plan_backward_rows`` /
  ``plan_backward_cols``, never copied by hand), every (y, dy) dtype pair,
  aligned / equally misaligned / unequally misaligned rows, negative and
  non-unit strides, Fortran order, non-last and multiple axes, fake devices
  (an sm_80 without clusters, a 2-SM GPU whose grids loop);
* ``out=``: poisoned with NaN first (every element written), in place on
  ``dy`` or ``y``, strided; special values; errors needing a GPU array;
  64-bit indexing (``slow``).
CPU tests: result dtype table, regimes at the thresholds, the enumeration
``all_backward_kernels`` covering every plan, host-array errors, and NVRTC
compilation of every instantiation for sm_80 and sm_90 without spills.

Tolerance: |dx - ref| <= atol + 4 (rtol + sum_rtol(L)) x scale (the table of
``_util`` for the result dtype), where scale bounds the terms that cancel:
|y| (|dy| + sum |y dy|) for softmax, |dy| + e^y sum |dy| for log-softmax.
"""
import math
import os

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import cusoftmax
from cusoftmax import _dispatch, reference
from cusoftmax._dispatch import DeviceInfo

from _check import (_transitions, apply_view, base_shape_for, fake_device, finalize_ops, host,
                    layout_ops, red_axes)
from _util import DTYPES, TOL, np_dtype, sum_rtol, tol_key

H100 = DeviceInfo(132, 90)
A100 = DeviceInfo(108, 80)
PAIRS = [(a, b) for a in DTYPES for b in DTYPES]
SCALE = float(os.environ.get("CUSOFTMAX_HYPOTHESIS_SCALE", "1"))
#: Elements per hypothesis example (y, dy and dx each).
ELEM_CAP = 1 << 21


def n_examples(n):
    return max(1, int(n * SCALE))


def _fn(log):
    return cusoftmax.log_softmax_backward if log else cusoftmax.softmax_backward


def _out_name(ty, td):
    return _dispatch.backward_result_dtype(ty, td)


# ----------------------------------------------------------------------------
# Inputs: GPU views whose logical values are given host arrays
# ----------------------------------------------------------------------------
def gpu_view(values, dtype, ops=()):
    """A GPU array of ``dtype`` whose view ``ops`` (see ``_check``) of a
    contiguous base holds ``values`` (the rest of the base is 0)."""
    import cupy

    ops = finalize_ops(list(ops), values.shape)
    base = np.zeros(base_shape_for(values.shape, ops), dtype=np.float64)
    apply_view(base, ops)[...] = values
    return apply_view(cupy.asarray(base.astype(np_dtype(dtype))), ops)


def make_inputs(rng, shape, ty, td, axis, log, ops_y=(), ops_d=(), scale=2.0):
    """y = (log-)softmax of random logits (float64, then rounded to ``ty``),
    dy standard normal: as GPU views with the given layouts."""
    x = rng.standard_normal(shape) * scale
    yh = (reference.log_softmax if log else reference.softmax)(x, axis=axis)
    dh = rng.standard_normal(shape)
    return gpu_view(yh, ty, ops_y), gpu_view(dh, td, ops_d)


def poisoned_out(shape, dtype, ops=()):
    """An ``out=`` view filled with NaN (every element must be overwritten)."""
    return gpu_view(np.full(shape, np.nan), dtype, ops)


def check_dx(dx, y, dy, axis, log, ctx=""):
    """dx against the float64 reference computed from the GPU inputs."""
    yh, dh = reference.to_float64(host(y)), reference.to_float64(host(dy))
    ref = (reference.log_softmax_backward if log else reference.softmax_backward)(yh, dh, axis)
    exp_dt = _out_name(np.dtype(y.dtype).name, np.dtype(dy.dtype).name)
    assert np.dtype(dx.dtype).name == exp_dt, f"{ctx}: dtype {dx.dtype}, expected {exp_dt}"
    got = reference.to_float64(host(dx))
    assert got.shape == ref.shape, f"{ctx}: shape {got.shape} != {ref.shape}"
    axes = red_axes(axis, yh.ndim)
    L = math.prod(yh.shape[a] for a in axes) if yh.ndim else 1
    with np.errstate(over="ignore", invalid="ignore"):
        if log:
            scale = np.abs(dh) + np.exp(yh) * np.sum(np.abs(dh), axis=axes, keepdims=True)
        else:
            scale = np.abs(yh) * (np.abs(dh) + np.sum(np.abs(yh * dh), axis=axes, keepdims=True))
    key = tol_key(exp_dt)
    atol, rtol = TOL[key]
    lim = atol + 4 * (rtol + sum_rtol(key, L)) * scale
    nan_r = np.isnan(ref)
    if not np.array_equal(np.isnan(got), nan_r):
        bad = np.argwhere(np.isnan(got) != nan_r)
        raise AssertionError(f"{ctx}: NaN pattern differs at {len(bad)} positions, first "
                             f"{tuple(bad[0])}: got {got[tuple(bad[0])]!r}, ref {ref[tuple(bad[0])]!r}")
    err = np.where(nan_r, 0.0, np.abs(got - ref))
    if err.size and (err > lim).any():
        i = np.unravel_index(int(np.argmax(err - lim)), err.shape)
        raise AssertionError(f"{ctx}: {int((err > lim).sum())} of {err.size} elements outside "
                             f"tolerance ({key}, L={L}), worst at {i}: got {got[i]!r}, reference "
                             f"{ref[i]!r}, allowed {lim[i]:.3g}")


def regime_of(y, dy, axis=-1, log=False, out=None):
    """The regime a call takes ("warp", ..., "cols", "copy/<regime>", ...)."""
    from cusoftmax import _backward

    p = _backward._prepare(y, dy, axis, log, out)
    if p.kind in ("cast", "empty"):
        return p.kind
    r = p.launch.plan.regime
    return f"copy/{r}" if p.kind == "copy" else r


# ----------------------------------------------------------------------------
# Boundaries of the backward dispatcher (scanned, never hand-copied)
# ----------------------------------------------------------------------------
def _plan_key(p):
    return (p.regime, p.kernel, p.pre_kernel, p.block)


_len_cache: dict = {}


def bwd_row_lengths(ty, td, dev, max_len=1 << 20):
    """Row lengths at and +-1 around every change of ``plan_backward_rows``'s
    kernel (row counts from 1 to many; aligned, misaligned, scalar rows),
    plus the documented regime limits and the streaming chunk sizes."""
    to = _out_name(ty, td)
    key = (ty, td, dev)
    vals = _len_cache.get(key)
    if vals is None:
        vals = set()
        sms = dev.sm_count
        for R in sorted({1, 3, max(1, sms - 1), sms, 8 * sms}):
            for vec, mis, log in ((True, False, False), (True, True, False), (False, False, False),
                                  (True, False, True)):
                def f(L, R=R, vec=vec, mis=mis, log=log):
                    return _plan_key(_dispatch.plan_backward_rows(R, L, ty, td, to, log, dev, vec, mis))
                vals |= _transitions(f, 1, 1 << 20)
        for aligned in (True, False):
            for log in (False, True):
                thr = _dispatch.backward_row_thresholds(ty, td, to, dev, aligned, log)
                for k, v in thr.items():
                    if k not in ("few_rows", "smem_rows", "smem_many_rows"):
                        vals |= set(v) if isinstance(v, tuple) else {v}
            pack = _dispatch.bwd_pack_width(ty, td, to) if aligned else 1
            for t in (_dispatch.STREAM_THREADS, _dispatch.SPLIT_THREADS):
                vals.add(t * _dispatch.STREAM_UNROLL * pack)
        vals.update((1, 2, 3))
        vals = sorted({w for v in vals for w in (v - 1, v, v + 1) if w >= 1})
        _len_cache[key] = vals
    return [v for v in vals if v <= max_len]


def bwd_row_counts(dev, L, ty="float32", td="float32"):
    """Row counts around the grid caps and wherever the plan for rows of
    ``L`` changes with the row count (FEW_ROWS_PER_SM x SMs...)."""
    to = _out_name(ty, td)
    vals = {1, 2, 3, 5, 33}
    cap = dev.sm_count * _dispatch.MAX_BLOCKS_PER_SM
    vals.update((cap, 4 * cap))
    prev = None
    for R in range(1, 2 * dev.sm_count + 2):
        k = _plan_key(_dispatch.plan_backward_rows(R, L, ty, td, to, False, dev))
        if prev is not None and k != prev:
            vals.add(R)
        prev = k
    vals.add(_dispatch.FEW_ROWS_PER_SM * dev.sm_count)
    vals.add(_dispatch.BWD_WARP_LONG_MIN_ROWS)
    return sorted({w for v in vals for w in (v - 1, v, v + 1) if w >= 1})


def bwd_col_lengths(ty, td, dev):
    """Reduced lengths where ``plan_backward_cols`` changes block size, and
    the in-register limits (threads / tx) x CAP."""
    to = _out_name(ty, td)
    cap = _dispatch.bwd_cols_cap(ty, td, to)
    vals = {1, 2, 3}
    t = _dispatch.COLS_THREADS
    while t <= _dispatch.BWD_COLS_MAX_THREADS:
        for tx in (1, 2, 4, 8, 16, 32):
            vals.add((t // tx) * cap)
        t *= 2
    for O, I in ((1, 1), (1, 32), (4, 8), (dev.sm_count, 64)):
        def f(L, O=O, I=I):
            p = _dispatch.plan_backward_cols(O, L, I, ty, td, to, False, dev)
            return _plan_key(p) + (p.extra,)
        vals |= _transitions(f, 1, 1 << 15)
    return sorted({w for v in vals for w in (v - 1, v, v + 1) if w >= 1})


# ============================================================================
# CPU tests
# ============================================================================
def test_result_dtype_table():
    """float pairs promote as NumPy does; bfloat16 as ml_dtypes does."""
    for a in DTYPES:
        for b in DTYPES:
            r = _dispatch.backward_result_dtype(a, b)
            if "bfloat16" not in (a, b):
                assert r == np.result_type(np.dtype(a), np.dtype(b)).name, (a, b)
            elif a == b:
                assert r == "bfloat16"
            elif "float64" in (a, b):
                assert r == "float64", (a, b)
            else:  # bfloat16 with float16 or float32
                assert r == "float32", (a, b)
    from cusoftmax._backward import result_dtype
    assert result_dtype(np_dtype("bfloat16"), np_dtype("float16")) == np.float32
    assert result_dtype(np_dtype("bfloat16"), np_dtype("bfloat16")) == np_dtype("bfloat16")


@pytest.mark.parametrize("dev", [H100, A100], ids=["H100", "A100"])
@pytest.mark.parametrize("ty,td", [("float32", "float32"), ("float16", "float16"),
                                   ("bfloat16", "float32"), ("float64", "float64"),
                                   ("float16", "float64")])
def test_regimes_at_thresholds(dev, ty, td):
    to = _out_name(ty, td)
    few = _dispatch.FEW_ROWS_PER_SM * dev.sm_count
    for aligned in (True, False):
        thr = _dispatch.backward_row_thresholds(ty, td, to, dev, aligned)

        def regime(R, L):
            return _dispatch.plan_backward_rows(R, L, ty, td, to, False, dev, aligned, False).regime

        lo, hi = thr.get("smem", (0, -1))
        cs = thr.get("cstream", 10 ** 18)
        for R in (1, few - 1, few, 10 * few):
            staged = R >= thr.get("smem_rows", 10 ** 12)

            def expect(L, name):  # the staged kernel takes [lo, hi] when rows are many, the
                # cluster stream rows from `cs` on
                want = "smem" if staged and lo <= L <= hi else name
                if R >= few and L >= cs:
                    want = "cstream"
                assert regime(R, L) == want, (R, L)

            expect(1, "warp")
            expect(thr["warp"], "warp")
            expect(thr["warp"] + 1, "block")
            expect(thr["block"], "block")
            if "warp_many" in thr:  # softmax, many rows: the warp regime reaches further
                many = _dispatch.BWD_WARP_LONG_MIN_ROWS
                assert regime(many, thr["warp_many"]) == "warp"
                assert regime(many, thr["warp_many"] + 1) != "warp"
                assert regime(many - 1, thr["warp"] + 1) == "block"
                # float32 log-softmax (4-element packs) leaves the warp regime at any row count
                f32_log = _dispatch.bwd_pack_width(ty, td, to) == 4
                assert _dispatch.plan_backward_rows(many, thr["warp_many"], ty, td, to, True, dev,
                                                    aligned, False).regime == ("block" if f32_log else "warp")
            long_ = "split" if R < few else "stream"
            if dev.has_clusters:
                expect(thr["block"] + 1, "cluster")
                expect(thr["cluster"], "cluster")
                expect(thr["cluster"] + 1, long_)
                if "cstream" in thr:
                    expect(cs - 1, "cluster")
                    expect(cs, "cluster")
            else:
                assert "cluster" not in thr
                expect(thr["block"] + 1, long_)
            if "smem" in thr:
                pack = lo // _dispatch.BWD_SMEM_MIN_PACKS
                for L in (lo - pack, lo, hi, hi + 1):
                    got = regime(R, L)
                    assert (got == "smem") == (staged and lo <= L <= hi), (R, L, got)
    if ty in ("float32", "float64") and ty == td:  # staged kernel: 32/64-bit, many rows
        thr = _dispatch.backward_row_thresholds(ty, td, to, dev, True)
        assert "smem" in thr and thr["smem"][0] < thr["smem"][1]
    if ty == td == "float16":  # 16-bit softmax stays in registers; log-softmax is staged
        assert "smem" not in _dispatch.backward_row_thresholds(ty, td, to, dev, True)
        assert "smem" in _dispatch.backward_row_thresholds(ty, td, to, dev, True, log=True)
    # cols: the in-register limit grows the block up to BWD_COLS_MAX_THREADS
    p = _dispatch.plan_backward_cols(4, 10 ** 6, 64, ty, td, to, True, dev)
    assert p.regime == "cols" and p.block == (_dispatch.BWD_COLS_MAX_THREADS,)


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_16bit_log_backward_long_rows(dt):
    """Many rows of 16-bit log-softmax too long to stage stream (measured
    faster than a cluster per row); softmax, float32 and few rows keep the
    cluster. Log-softmax rows are staged (one row a block) up to the staging
    budget less 1 KiB when rows are many (>= 2 per SM)."""
    def regime(R, L, log, d=dt):
        return _dispatch.plan_backward_rows(R, L, d, d, d, log, H100).regime

    hi = (min(_dispatch.BWD_SMEM_BYTES, H100.max_smem) - 1024) // 16  # packs
    assert regime(512, 8 * hi, True) == "smem"
    assert regime(512, 8 * hi + 8, True) == "stream"
    assert regime(H100.sm_count, 131072, True) == "stream"
    assert regime(512, 65536, False) == "cluster"
    assert regime(64, 65536, True) == "cluster"
    assert regime(512, 4 * hi, True, "float32") == "smem"
    assert regime(512, 4 * hi + 4, True, "float32") == "cstream"
    assert regime(512, 65536, True, "float32") == "cstream"
    # between few rows and two per SM: the cluster stream from 49152 columns
    assert regime(200, 49152, True, "float32") == "cstream"
    assert regime(200, 49148, True, "float32") == "cluster"
    assert regime(512, 131072, False, "float32") == "cstream"
    assert regime(512, 131068, False, "float32") == "cluster"
    assert regime(64, 131072, False, "float32") == "cluster"  # few rows
    assert regime(512, 16384, True) == "smem"


@pytest.mark.parametrize("dev", [H100, A100], ids=["H100", "A100"])
def test_enumeration_covers_every_plan(dev):
    """all_backward_kernels (what the compile check builds) contains every
    kernel the dispatcher picks, over random shapes, dtypes, flags."""
    known = set(all_kernels(dev))
    rng = np.random.default_rng(0)
    for _ in range(3000):
        ty, td = PAIRS[rng.integers(len(PAIRS))]
        to = _out_name(ty, td)
        L = int(np.exp(rng.uniform(0, np.log(3e7))))
        R = int(rng.choice([1, 2, 7, dev.sm_count - 1, dev.sm_count, 10 ** 5]))
        log, vec, mis = (bool(b) for b in rng.integers(0, 2, 3))
        p = _dispatch.plan_backward_rows(R, L, ty, td, to, log, dev, vec, mis)
        for k in p.kernels():
            assert (p.source, k) in known, k
        O, I = int(rng.integers(1, 300)), int(rng.integers(1, 300))
        p = _dispatch.plan_backward_cols(O, L, I, ty, td, to, log, dev)
        assert (p.source, p.kernel) in known, p.kernel


_kernel_cache: dict = {}


def all_kernels(dev):
    if dev not in _kernel_cache:
        _kernel_cache[dev] = _dispatch.all_backward_kernels(dev)
    return _kernel_cache[dev]


def test_kernel_names_exist_in_source():
    from cusoftmax._loader import expanded_source
    src = expanded_source(_dispatch.BWD_SOURCE)
    for s, k in all_kernels(H100):
        assert s == _dispatch.BWD_SOURCE
        assert k.split("<")[0] + "(" in src.replace("\n", ""), k


@pytest.mark.parametrize("fn", ["softmax_backward", "log_softmax_backward"])
def test_host_arrays_rejected(fn):
    with pytest.raises(TypeError, match="cupy.asarray"):
        getattr(cusoftmax, fn)(np.ones(3), np.ones(3))


def test_public_names():
    assert "softmax_backward" in cusoftmax.__all__ and "log_softmax_backward" in cusoftmax.__all__
    for f in (cusoftmax.softmax_backward, cusoftmax.log_softmax_backward):
        doc = f.__doc__
        assert "Parameters" in doc and "Returns" in doc and "Examples" in doc


# (NVRTC compile check of every backward instantiation: tests/test_compile.py)


# ============================================================================
# GPU tests
# ============================================================================
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_worked_example(dtype):
    import cupy

    x = cupy.asarray([[1.0, 2.0, 3.0], [1.0, 3.0, 5.0]], dtype=dtype)
    dyh = np.array([[0.1, 0.2, 0.7], [0.2, 0.3, 0.5]])
    dy = cupy.asarray(dyh, dtype=dtype)
    y = cusoftmax.softmax(x)
    dx = cusoftmax.softmax_backward(y, dy)
    expect = np.array([[-0.0381, -0.0792, 0.1173], [-0.0043, -0.0202, 0.0245]])
    np.testing.assert_allclose(host(dx), expect, atol=1e-4)
    check_dx(dx, y, dy, -1, False)
    ly = cusoftmax.log_softmax(x)
    ldx = cusoftmax.log_softmax_backward(ly, dy)
    check_dx(ldx, ly, dy, -1, True)
    # log-softmax's gradient through log p equals softmax's through p = e^y
    # with dy_p = dy / p:  dy - p sum(dy) = p (dy/p - sum(p dy/p))
    np.testing.assert_allclose(host(ldx), host(cusoftmax.softmax_backward(y, dy / y)), atol=1e-6)


@pytest.mark.gpu
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 17])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_explicit_jacobian(n, log, dtype):
    """dx = J^T dy; softmax: J = diag(p) - p p^T; log-softmax: J = I - 1 p^T."""
    import cupy

    rng = np.random.default_rng(n)
    x = rng.standard_normal((4, n)) * 2
    dyh = rng.standard_normal((4, n))
    xg = cupy.asarray(x, dtype=dtype)
    y = (cusoftmax.log_softmax if log else cusoftmax.softmax)(xg)
    dx = host(_fn(log)(y, cupy.asarray(dyh, dtype=dtype))).astype(np.float64)
    yh = host(y).astype(np.float64)
    dyq = dyh.astype(dtype).astype(np.float64)
    tol = 1e-13 if dtype == "float64" else 2e-6
    for r in range(4):
        p = np.exp(yh[r]) if log else yh[r]
        J = (np.eye(n) - np.outer(np.ones(n), p)) if log else (np.diag(p) - np.outer(p, p))
        np.testing.assert_allclose(dx[r], J.T @ dyq[r], rtol=0, atol=tol * (1 + np.abs(dyq[r]).sum()))


@pytest.mark.gpu
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("shape,axis", [((3, 7), -1), ((2, 6, 5), 1), ((4, 3, 2), (0, 2)), ((5, 4), None)])
def test_finite_differences(shape, axis, log):
    """The backward of the library's forward output is the VJP of the float64
    forward reference: central differences of sum(dy * f(x))."""
    import cupy

    rng = np.random.default_rng(len(shape) * 10 + (0 if axis is None else 1))
    x = rng.standard_normal(shape)
    dyh = rng.standard_normal(shape)
    f = reference.log_softmax if log else reference.softmax
    y = (cusoftmax.log_softmax if log else cusoftmax.softmax)(cupy.asarray(x), axis=axis)
    dx = host(_fn(log)(y, cupy.asarray(dyh), axis=axis))
    h = 1e-6
    fd = np.empty_like(x)
    for i in np.ndindex(*shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += h
        xm[i] -= h
        fd[i] = (np.sum(dyh * f(xp, axis=axis)) - np.sum(dyh * f(xm, axis=axis))) / (2 * h)
    np.testing.assert_allclose(dx, fd, rtol=0, atol=1e-7)


def _rows_case(data, ty, td, log, dev):
    """Draw (R, L) at a dispatch boundary and a layout; run and check."""
    to = _out_name(ty, td)
    Ls = bwd_row_lengths(ty, td, dev)
    L = data.draw(st.sampled_from([v for v in Ls if v <= ELEM_CAP]), label="L")
    Rs = [r for r in bwd_row_counts(dev, L, ty, td) if r * L <= ELEM_CAP] or [1]
    R = data.draw(st.sampled_from(Rs), label="R")
    layout = data.draw(st.sampled_from(["aligned", "mis_equal", "mis_y", "neg", "rowstride",
                                        "out_strided"]), label="layout")
    ops_y = ops_d = ops_o = ()
    out = None
    if layout == "mis_equal":  # y, dy, out all start 1 element past a vector
        ops_y = ops_d = ops_o = [("slice", 1, 1, None, 1)]
    elif layout == "mis_y":  # y alone misaligned: scalar accesses
        ops_y = [("slice", 1, 1, None, 1)]
    elif layout == "neg":  # reduced axis walked backwards in every array
        ops_y = ops_d = [("slice", 1, None, None, -1)]
    elif layout == "rowstride":
        ops_y = [("slice", 0, None, None, 2)]
        ops_d = [("slice", 0, None, None, -1)]
    elif layout == "out_strided":
        ops_o = [("slice", 0, None, None, 2)]
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 16), label="seed"))
    y, dy = make_inputs(rng, (R, L), ty, td, -1, log, ops_y, ops_d)
    if layout in ("mis_equal", "out_strided"):
        out = poisoned_out((R, L), to, ops_o)
    dx = _fn(log)(y, dy, out=out)
    if out is not None:
        assert dx is out
    ctx = f"{ty}/{td} log={log} R={R} L={L} {layout} ({regime_of(y, dy, -1, log, out)})"
    check_dx(dx, y, dy, -1, log, ctx)


_PAIR_GROUPS = [("float32", "float32"), ("float16", "float16"), ("bfloat16", "bfloat16"),
                ("float64", "float64"), ("float16", "float32"), ("bfloat16", "float16"),
                ("float32", "float64"), ("bfloat16", "float64")]


@pytest.mark.gpu
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("ty,td", _PAIR_GROUPS)
@settings(max_examples=n_examples(12))
@given(data=st.data())
def test_rows_at_thresholds(data, ty, td, log):
    from _check import real_device_info
    _rows_case(data, ty, td, log, real_device_info())


@pytest.mark.gpu
@pytest.mark.parametrize("fake", ["sm80", "sm90_2sms"])
@settings(max_examples=n_examples(15))
@given(data=st.data())
def test_rows_fake_devices(data, fake):
    """Plans for an sm_80 (no clusters) and a 2-SM GPU (grids loop), run on
    the real GPU."""
    ty, td = data.draw(st.sampled_from(PAIRS), label="dtypes")
    log = data.draw(st.booleans(), label="log")
    sms, cc = (108, 80) if fake == "sm80" else (2, 90)
    with fake_device(sms, cc) as dev:
        _rows_case(data, ty, td, log, dev)


@pytest.mark.gpu
@settings(max_examples=n_examples(40))
@given(data=st.data())
def test_layouts_and_axes(data):
    """Every layout of ``_check.LAYOUTS`` for y and for dy (independently),
    axes: last, first, middle, several, None: rows, cols and copy paths."""
    ty, td = data.draw(st.sampled_from(PAIRS), label="dtypes")
    log = data.draw(st.booleans(), label="log")
    ndim = data.draw(st.integers(1, 3), label="ndim")
    shape = tuple(data.draw(st.lists(st.integers(1, 40), min_size=ndim, max_size=ndim), label="shape"))
    axes_opts = [-1, 0, None] + ([1, (0, ndim - 1)] if ndim >= 2 else [])
    axis = data.draw(st.sampled_from(axes_opts), label="axis")
    lay_names = ("c", "f", "transposed", "perm", "slice1", "step2", "neg", "rowslice", "offset",
                 "neg_step")

    def ops_for(label):
        name = data.draw(st.sampled_from(lay_names), label=label)
        return layout_ops(name, ndim, lambda lo, hi: data.draw(st.integers(lo, hi)))

    ops_y, ops_d = ops_for("layout_y"), ops_for("layout_dy")
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 16), label="seed"))
    y, dy = make_inputs(rng, shape, ty, td, axis, log, ops_y, ops_d)
    use_out = data.draw(st.sampled_from([None, "c", "dy_inplace", "y_inplace", "strided"]), label="out")
    to = _out_name(ty, td)
    out = None
    if use_out == "c":
        out = poisoned_out(shape, to)
    elif use_out == "strided":
        out = poisoned_out(shape, to, layout_ops("neg_step", ndim, lambda lo, hi: lo))
    elif use_out == "dy_inplace" and td == to:
        out = dy
    elif use_out == "y_inplace" and ty == to:
        out = y
    ctx = f"{ty}/{td} log={log} shape={shape} axis={axis} ops_y={ops_y} ops_dy={ops_d} out={use_out}"
    yh, dh = host(y).copy(), host(dy).copy()  # inputs before a possible in-place write
    dx = _fn(log)(y, dy, axis=axis, out=out)
    if out is not None:
        assert dx is out
    check_dx(dx, yh, dh, axis, log, ctx)


@pytest.mark.gpu
@settings(max_examples=n_examples(30))
@given(data=st.data())
def test_cols_thresholds(data):
    """Non-last axis of a C array: (O, L, I) with L at the cols kernel's
    in-register limits and block-size changes, I around the tile widths."""
    from _check import real_device_info
    dev = real_device_info()
    ty, td = data.draw(st.sampled_from(PAIRS), label="dtypes")
    log = data.draw(st.booleans(), label="log")
    L = data.draw(st.sampled_from(bwd_col_lengths(ty, td, dev)), label="L")
    I = data.draw(st.sampled_from([1, 2, 3, 7, 8, 15, 16, 17, 31, 32, 33, 65]), label="I")
    O = data.draw(st.sampled_from([1, 2, 3, dev.sm_count + 1]), label="O")
    if O * L * I > ELEM_CAP:
        O = max(1, ELEM_CAP // (L * I))
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 16), label="seed"))
    y, dy = make_inputs(rng, (O, L, I), ty, td, 1, log)
    reg = regime_of(y, dy, 1, log)
    assert reg == "cols" or I == 1 or L == 1, reg  # size-1 axes drop out: rows
    dx = _fn(log)(y, dy, axis=1)
    check_dx(dx, y, dy, 1, log, f"{ty}/{td} log={log} O={O} L={L} I={I} ({reg})")


@pytest.mark.gpu
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("delta", [-1, 0, 1])
@pytest.mark.parametrize("dev_kind", ["real", "sm80"])
def test_few_rows_boundary_long_rows(delta, log, dev_kind):
    """Rows just longer than the on-chip limit, FEW_ROWS_PER_SM x SMs +-1 of
    them: split (two kernels, workspace) below, stream at and above."""
    from _check import real_device_info
    import contextlib
    ctx = fake_device(108, 80) if dev_kind == "sm80" else contextlib.nullcontext(real_device_info())
    with ctx as dev:
        thr = _dispatch.backward_row_thresholds("float32", "float32", "float32", dev)
        L = thr.get("cluster", thr["block"]) + 1
        R = _dispatch.FEW_ROWS_PER_SM * dev.sm_count + delta
        rng = np.random.default_rng(R)
        y, dy = make_inputs(rng, (R, L), "float32", "float32", -1, log)
        cs = _dispatch.backward_row_thresholds("float32", "float32", "float32", dev, True, log).get(
            "cstream", 10 ** 18)
        assert regime_of(y, dy, -1, log) == ("split" if delta < 0 else "cstream" if L >= cs else "stream")
        out = poisoned_out((R, L), "float32")
        _fn(log)(y, dy, out=out)
        check_dx(out, y, dy, -1, log, f"R={R} L={L}")


_LAYOUT_OPS = {"aligned": ((), (), ()),  # (y, dy, out) view ops, as in _rows_case
               "mis_equal": ([("slice", 1, 1, None, 1)],) * 3,
               "neg": ([("slice", 1, None, None, -1)], [("slice", 1, None, None, -1)], ())}


def _run_rows(R, L, ty, log, layout, want_regime):
    """Run R rows of L with a layout of _LAYOUT_OPS; the call must take
    ``want_regime`` and match the reference."""
    oy, od, oo = _LAYOUT_OPS[layout]
    rng = np.random.default_rng(R * 7 + L)
    y, dy = make_inputs(rng, (R, L), ty, ty, -1, log, oy, od)
    out = poisoned_out((R, L), ty, oo) if oo else None
    reg = regime_of(y, dy, -1, log, out)
    assert reg.split("/")[-1] == want_regime, (R, L, layout, reg)
    dx = _fn(log)(y, dy, out=out)
    check_dx(dx, y, dy, -1, log, f"{ty} log={log} R={R} L={L} {layout} ({reg})")


@pytest.mark.gpu
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("layout", ["aligned", "mis_equal", "neg"])
def test_cluster_stream_rows(log, layout):
    """softmax_backward_cstream (many long float32 rows, a cluster of blocks
    per row, each streaming a slice twice): at its shortest row and beyond,
    odd lengths, misaligned and reversed rows, more rows than resident
    clusters (each cluster loops over rows). Planned for a 2-SM stand-in
    (few rows = 2) so the arrays stay small; the kernel runs on the real GPU.
    From two rows per SM on, rows the staged kernel holds stay staged."""
    with fake_device(2, 90) as dev:
        thr = _dispatch.backward_row_thresholds("float32", "float32", "float32", dev, True, log)
        cs = thr["cstream"]
        many = max(cs, thr["smem"][1] + 1)
        assert thr["smem_rows"] == 4
        for R, L in ((3, cs + 3), (37, many), (5, 3 * many + 1)):
            _run_rows(R, L, "float32", log, layout, "cstream")


@pytest.mark.gpu
@pytest.mark.parametrize("ty", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("layout", ["aligned", "mis_equal"])
def test_staged_log_rows_one_per_block(ty, layout):
    """The staged log-softmax kernel (one stage, one row a block, as many
    blocks an SM as shared memory allows): the shortest and longest staged
    rows and one between, which take three of its block shapes (threads,
    launch bounds), aligned and misaligned, odd lengths."""
    with fake_device(2, 90) as dev:
        lo, hi = _dispatch.backward_row_thresholds(ty, ty, ty, dev, True, True)["smem"]
        pack = _dispatch.bwd_pack_width(ty, ty, ty)
        shapes = set()
        for L in (lo, lo + 5, 2 * lo, hi):
            p = _dispatch.plan_backward_rows(9, L, ty, ty, ty, True, dev)
            threads, minb = _dispatch.smem1_shape(p.extra[0] * 16, dev)
            assert p.regime == "smem" and p.kernel.endswith(f", {threads}, 1, {minb}>"), p.kernel
            assert p.block == (threads,) and p.grid == (9,), p
            shapes.add(threads * 10 + minb)
            # a misaligned row spans one more pack: a pack shorter still fits
            _run_rows(9, L - (pack if layout == "mis_equal" else 0), ty, True, layout, "smem")
        assert len(shapes) == 3, shapes


@pytest.mark.gpu
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("L", [1, 100, 5000, 300000])
def test_in_place_on_dy_and_y(L, log):
    rng = np.random.default_rng(L)
    for target in ("dy", "y"):
        y, dy = make_inputs(rng, (3, L), "float32", "float32", -1, log)
        yh, dh = host(y).copy(), host(dy).copy()
        out = dy if target == "dy" else y
        res = _fn(log)(y, dy, out=out)
        assert res is out
        check_dx(res, yh, dh, -1, log, f"in place on {target}")


@pytest.mark.gpu
def test_special_values():
    import cupy

    y = cupy.asarray([[0.2, 0.3, 0.5], [0.2, 0.3, 0.5], [0.0, 0.0, 1.0]])
    dy = cupy.asarray([[1.0, np.nan, 0.0], [1.0, 2.0, 3.0], [np.inf, 1.0, 1.0]])
    dx = host(cusoftmax.softmax_backward(y, dy))
    assert np.isnan(dx[0]).all() and np.isnan(dx[2]).all()  # NaN / 0 * inf in the sum
    np.testing.assert_allclose(dx[1], host(y[1]) * (host(dy[1]) - 2.3), atol=1e-12)
    ly = cupy.asarray([[-np.inf, np.log(0.5), np.log(0.5)]])
    ldy = cupy.asarray([[3.0, 1.0, -1.0]])
    ldx = host(cusoftmax.log_softmax_backward(ly, ldy))
    np.testing.assert_allclose(ldx, [[3.0, 1.0 - 1.5, -1.0 - 1.5]], atol=1e-12)  # e^-inf = 0


@pytest.mark.gpu
def test_dtypes_and_integer_promotion():
    import cupy

    y = cupy.asarray([[0.25, 0.25, 0.5]])
    for ty, td in PAIRS:
        dx = cusoftmax.softmax_backward(gpu_view(host(y), ty), gpu_view(np.array([[1.0, 2.0, 3.0]]), td))
        assert np.dtype(dx.dtype).name == _out_name(ty, td)
    # integer dy promotes like numpy.exp (int64 -> float64), then with y
    dx = cusoftmax.softmax_backward(y.astype(cupy.float32), cupy.asarray([[1, 2, 3]], dtype=cupy.int64))
    assert dx.dtype == np.float64
    np.testing.assert_allclose(host(dx), [[0.25 * (1 - 2.25), 0.25 * (2 - 2.25), 0.5 * (3 - 2.25)]])
    dx = cusoftmax.softmax_backward(y.astype(cupy.float16), cupy.asarray([[1, 2, 3]], dtype=cupy.int8))
    assert dx.dtype == np.float16


@pytest.mark.gpu
def test_errors():
    import cupy

    y = cupy.ones((3, 4), dtype=cupy.float32) / 4
    with pytest.raises(ValueError, match=r"y \(3, 4\).*dy \(4, 3\)"):
        cusoftmax.softmax_backward(y, cupy.ones((4, 3), dtype=cupy.float32))
    with pytest.raises(ValueError, match="same shape"):
        cusoftmax.log_softmax_backward(y, cupy.ones((3, 5), dtype=cupy.float32))
    with pytest.raises(TypeError, match="dtype"):
        cusoftmax.softmax_backward(y, y, out=cupy.empty((3, 4), dtype=cupy.float64))
    with pytest.raises(ValueError, match="shape"):
        cusoftmax.softmax_backward(y, y, out=cupy.empty((4, 3), dtype=cupy.float32))
    big = cupy.zeros((4, 4), dtype=cupy.float32)
    with pytest.raises(ValueError, match="overlaps"):
        cusoftmax.softmax_backward(big[:3], big[:3], out=big[1:])
    with pytest.raises(ValueError, match="overlaps"):
        cusoftmax.softmax_backward(y, big[1:], out=big[:3])
    with pytest.raises(TypeError, match="out must be a cupy.ndarray"):
        cusoftmax.softmax_backward(y, y, out=np.empty((3, 4), np.float32))
    with pytest.raises(ValueError, match="zero stride"):
        cusoftmax.softmax_backward(y, y, out=cupy.broadcast_to(cupy.zeros(4, cupy.float32), (3, 4)))
    with pytest.raises(ValueError, match="empty axis"):
        cusoftmax.softmax_backward(cupy.ones((3, 0)), cupy.ones((3, 0)))
    with pytest.raises(np.exceptions.AxisError if hasattr(np, "exceptions") else ValueError):
        cusoftmax.softmax_backward(y, y, axis=2)
    with pytest.raises(TypeError, match="bool"):
        cusoftmax.softmax_backward(y, cupy.ones((3, 4), dtype=bool))
    with pytest.raises(TypeError, match="dy"):
        cusoftmax.softmax_backward(y, [[1.0] * 4] * 3)
    # empty non-reduced axis: an empty result
    e = cusoftmax.softmax_backward(cupy.ones((0, 4)), cupy.ones((0, 4)))
    assert e.shape == (0, 4)
    # broadcast dy (stride 0) is read, never written
    db = cupy.broadcast_to(cupy.asarray([1.0, 2.0, 3.0, 4.0], dtype=cupy.float32), (3, 4))
    check_dx(cusoftmax.softmax_backward(y, db), y, db, -1, False, "broadcast dy")
    if cupy.cuda.runtime.getDeviceCount() >= 2:
        with cupy.cuda.Device(1):
            y1 = cupy.ones((3, 4), dtype=cupy.float32)
        with pytest.raises(ValueError, match="same device"):
            cusoftmax.softmax_backward(y, y1)


@pytest.mark.gpu
def test_repeated_calls_use_cache():
    """Second call with the same signature reuses the prepared launch."""
    import cupy
    from cusoftmax import _backward

    y, dy = make_inputs(np.random.default_rng(1), (5, 300), "float32", "float32", -1, False)
    a = cusoftmax.softmax_backward(y, dy)
    n = len(_backward._cache)
    b = cusoftmax.softmax_backward(y, dy)
    assert len(_backward._cache) == n
    assert cupy.array_equal(a, b)


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("log", [False, True])
def test_64bit_indexing(log):
    """More than 2^31 elements: rows past the 32-bit offset limit are right."""
    import cupy

    R, L = 65537, 32768  # 2^31 + 32768 elements of float16
    try:
        y = cupy.random.random((R, L), dtype=cupy.float32).astype(cupy.float16)
        dy = cupy.random.random((R, L), dtype=cupy.float32).astype(cupy.float16)
        if log:
            cupy.log(y, out=y)
        dx = _fn(log)(y, dy)
    except cupy.cuda.memory.OutOfMemoryError:
        pytest.skip("not enough GPU memory for 2^31 elements")
    for r in (0, R // 2, R - 2, R - 1):
        check_dx(dx[r:r + 1], y[r:r + 1], dy[r:r + 1], -1, log, f"row {r}")
    del y, dy, dx
    cupy.get_default_memory_pool().free_all_blocks()
