"""Forward softmax / log_softmax on the GPU: hypothesis property tests.

Shapes are drawn around every dispatch boundary (derived from
``cusoftmax._dispatch``: the warp lanes ladder, block and cluster sizes, the
regime limits of ``row_thresholds``, FEW_ROWS_PER_SM x SMs, grid caps), for
every dtype and dtype pair, axis form and memory layout, with special values.
Properties: agreement with ``cusoftmax.reference`` under the tolerance table
of ``_util``, rows summing to 1, shift invariance, every output element
written and nothing outside ``out`` touched, ``x`` left unchanged.

Some examples plan as if on another GPU (``fake_device``): an sm_80 (no
clusters: long rows go to split/stream sooner) and a 2-SM GPU (tiny grids:
every grid-stride loop runs many times, and "few rows" means 1).

``test_regimes_*`` run on the CPU. Large-array tests are marked ``slow``.
Example counts scale with $CUSOFTMAX_HYPOTHESIS_SCALE (default 1).
"""
import dataclasses
import math
import os

import numpy as np
import pytest
from hypothesis import Phase, event, given, settings, strategies as st

import cusoftmax
from cusoftmax import _dispatch, reference
from cusoftmax._dispatch import DeviceInfo

from _check import (LAYOUTS, SENTINEL, SPECIALS, apply_view, assert_no_sentinel, assert_untouched,
                    base_shape_for, check_forward, col_lengths, covered_mask, fake_device, finalize_ops,
                    host, inner_lengths, layout_ops, plan_of, random_values, real_device_info, row_counts,
                    row_lengths)
from _util import DTYPES, np_dtype, tolerance

SCALE = float(os.environ.get("CUSOFTMAX_HYPOTHESIS_SCALE", "1"))
#: No shrinking by default: each shrink step may compile new kernels, which
#: can take minutes; the failing example is still printed (and its blob).
#: CUSOFTMAX_HYPOTHESIS_SHRINK=1 shrinks.
PHASES = tuple(p for p in Phase if p != Phase.shrink or os.environ.get("CUSOFTMAX_HYPOTHESIS_SHRINK") == "1")
#: Elements per hypothesis example (keeps each example well under a second).
ELEM_CAP = 1 << 20


def n_examples(n):
    return max(1, int(n * SCALE))


def _fn(log):
    return cusoftmax.log_softmax if log else cusoftmax.softmax


# ----------------------------------------------------------------------------
# One case: build x as a view of a contiguous base (host copy kept exactly),
# call, check everything
# ----------------------------------------------------------------------------
def run_case(xh_base, ops, axis=-1, log=False, out_dtype=None, out_mode=None, algorithm="auto",
             ctx=""):
    import cupy

    x_base = cupy.asarray(xh_base)
    x = apply_view(x_base, ops)
    xh = apply_view(xh_base, ops).copy()
    odt = np_dtype(out_dtype) if out_dtype else cusoftmax._arrays.float_dtype_for(xh.dtype)
    kw = {"axis": axis, "algorithm": algorithm}
    if out_dtype:
        kw["dtype"] = odt
    S = SENTINEL[log]
    out = ob = None
    if out_mode == "inplace" and odt != x.dtype:
        out_mode = None
    if out_mode == "fresh":
        out = cupy.asarray(np.full(x.shape, S, dtype=odt))
    elif out_mode == "view":
        obh = np.full(xh_base.shape, S, dtype=odt)
        ob = cupy.asarray(obh)
        out = apply_view(ob, ops)
    elif out_mode == "inplace":
        out = x
    regime = plan_of(x, axis, kw.get("dtype"), algorithm, log, out)
    ctx = (f"{ctx} shape={x.shape} strides={x.strides} dtype={x.dtype.name} out_dtype={odt.name} "
           f"axis={axis} log={log} algorithm={algorithm} out={out_mode} ops={ops} regime={regime}")
    y = _fn(log)(x, out=out, **kw)
    if out is not None:
        assert y is out, ctx
    assert y.shape == x.shape and y.dtype == odt, ctx
    check_forward(y, xh, axis, log, out_dtype=odt, ctx=ctx, naive=algorithm == "naive")
    if out_mode in ("fresh", "view"):
        assert_no_sentinel(y, S, ctx)
    if out_mode == "view":
        assert_untouched(ob, S, covered_mask(xh_base.shape, ops), ctx)
    if out_mode != "inplace":
        after = host(x_base)
        assert np.array_equal(after.view(np.uint8), xh_base.view(np.uint8)), f"{ctx}: x was modified"
    _event(f"regime={regime}")
    return y, regime


def _event(value):
    """hypothesis.event, a no-op outside a hypothesis test."""
    try:
        event(value)
    except Exception:  # hypothesis.errors.InvalidArgument outside @given
        pass


def build_base(rng, shape, ops, dtype, special="normal", axis=-1, scale=None):
    """Host base array whose view ``apply_view(base, ops)`` has ``shape`` and
    carries the requested value pattern along the reduced axes."""
    bshape = base_shape_for(shape, ops)
    base = random_values(rng, bshape, dtype)
    v = apply_view(base, ops)
    v[...] = random_values(rng, tuple(shape), dtype, special, axis, scale)
    return base


DEVICES = ("real", "real", "real", "sm80", "tiny")


def device_for(name):
    real = real_device_info()
    if name == "sm80":
        return DeviceInfo(real.sm_count, 80)
    if name == "tiny":
        return DeviceInfo(2, real.cc)
    return real


class _maybe_fake:
    def __init__(self, name):
        self.name = name
        self.cm = None

    def __enter__(self):
        if self.name != "real":
            d = device_for(self.name)
            self.cm = fake_device(d.sm_count, d.cc)
            self.cm.__enter__()
        return device_for(self.name)

    def __exit__(self, *a):
        if self.cm is not None:
            self.cm.__exit__(*a)


def dtype_pair(draw):
    tin = draw(st.sampled_from(DTYPES))
    tout = draw(st.sampled_from((None, None, None) + DTYPES))
    return tin, (None if tout == tin else tout)


# ----------------------------------------------------------------------------
# Worked example
# ----------------------------------------------------------------------------
WORKED_X = [[1.0, 2.0, 3.0], [1.0, 3.0, 5.0]]
WORKED_Y = np.array([[0.0900, 0.2447, 0.6652], [0.0159, 0.1173, 0.8668]])


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_worked_example(dtype):
    import cupy
    x = cupy.asarray(np.array(WORKED_X).astype(np_dtype(dtype)))
    y = reference.to_float64(cusoftmax.softmax(x))
    np.testing.assert_allclose(y, WORKED_Y, atol=5e-5 if dtype in ("float32", "float64") else 4e-3)
    yl = reference.to_float64(cusoftmax.log_softmax(x))
    np.testing.assert_allclose(np.exp(yl), WORKED_Y, atol=5e-5 if dtype in ("float32", "float64") else 4e-3)
    for alg in ("naive", "safe", "online"):
        np.testing.assert_allclose(reference.to_float64(cusoftmax.softmax(x, algorithm=alg)), y,
                                   rtol=1e-2 if dtype in ("float16", "bfloat16") else 1e-5)


# ----------------------------------------------------------------------------
# Rows layout at every threshold +-1
# ----------------------------------------------------------------------------
@pytest.mark.gpu
@settings(max_examples=n_examples(160), phases=PHASES)
@given(data=st.data())
def test_rows_at_thresholds(data):
    draw = data.draw
    devname = draw(st.sampled_from(DEVICES))
    tin, tout = dtype_pair(draw)
    log = draw(st.booleans())
    with _maybe_fake(devname) as dev:
        lengths = row_lengths(tin, tout, dev, max_len=ELEM_CAP)
        L = draw(st.one_of(st.sampled_from(lengths), st.integers(1, 3000)))
        counts = [r for r in row_counts(dev) if r * L <= ELEM_CAP] or [1]
        R = draw(st.one_of(st.sampled_from(counts), st.integers(1, max(1, min(300, ELEM_CAP // L)))))
        layout = draw(st.sampled_from(("c", "c", "c", "rowslice", "offset", "slice1", "neg")))
        ops = finalize_ops(layout_ops(layout, 2, lambda lo, hi: draw(st.integers(lo, hi))), (R, L))
        out_mode = draw(st.sampled_from((None, None, "fresh", "view", "inplace")))
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        base = build_base(rng, (R, L), ops, tin)
        event(f"device={devname}")
        run_case(base, ops, -1, log, tout, out_mode, ctx=f"[{devname}]")


# ----------------------------------------------------------------------------
# Layouts and axes
# ----------------------------------------------------------------------------
SMALL_DIMS = (1, 2, 3, 4, 5, 7, 8, 16, 17, 31, 32, 33, 63, 64, 65, 100, 127, 129)


def _shape_and_axis(draw, dev, tin, tout):
    ndim = draw(st.integers(1, 4))
    shape = [draw(st.sampled_from(SMALL_DIMS)) for _ in range(ndim)]
    kind = draw(st.sampled_from(("int", "int", "neg", "tuple", "none")))
    if kind == "int":
        axis = draw(st.integers(0, ndim - 1))
    elif kind == "neg":
        axis = draw(st.integers(-ndim, -1))
    elif kind == "tuple":
        axes = draw(st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True))
        axis = tuple(a - ndim if draw(st.booleans()) else a for a in axes)
    else:
        axis = None
    # sometimes put a threshold length on one reduced axis
    red = [a % ndim for a in ((axis,) if isinstance(axis, int) else (axis or range(ndim)))]
    if draw(st.booleans()):
        a = draw(st.sampled_from(red))
        others = math.prod(shape[:a] + shape[a + 1:])
        lens = [v for v in row_lengths(tin, tout, dev, max_len=ELEM_CAP // max(others, 1))] or [1]
        shape[a] = draw(st.sampled_from(lens))
    while math.prod(shape) > ELEM_CAP:
        i = int(np.argmax(shape))
        shape[i] = max(1, shape[i] // 2)
    return tuple(shape), axis


@pytest.mark.gpu
@settings(max_examples=n_examples(160), phases=PHASES)
@given(data=st.data())
def test_layouts_and_axes(data):
    draw = data.draw
    devname = draw(st.sampled_from(DEVICES))
    tin, tout = dtype_pair(draw)
    log = draw(st.booleans())
    with _maybe_fake(devname) as dev:
        shape, axis = _shape_and_axis(draw, dev, tin, tout)
        layout = draw(st.sampled_from(LAYOUTS))
        ops = finalize_ops(layout_ops(layout, len(shape), lambda lo, hi: draw(st.integers(lo, hi))), shape)
        out_mode = draw(st.sampled_from((None, None, "fresh", "view", "inplace")))
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        base = build_base(rng, shape, ops, tin, axis=axis)
        event(f"layout={layout}")
        run_case(base, ops, axis, log, tout, out_mode, ctx=f"[{devname}]")


@pytest.mark.gpu
@settings(max_examples=n_examples(60), phases=PHASES)
@given(data=st.data())
def test_cols_thresholds(data):
    """Reduction over a non-last axis of a C-ordered (O, L, I) array: L
    around the cols kernel's in-register limits, I around its tile widths."""
    draw = data.draw
    tin, tout = dtype_pair(draw)
    log = draw(st.booleans())
    dev = real_device_info()
    L = draw(st.sampled_from(col_lengths(dev, max_len=ELEM_CAP)))
    I = draw(st.sampled_from(inner_lengths()))
    O = draw(st.sampled_from([o for o in (1, 2, 3, dev.sm_count, 2 * dev.sm_count + 1) if o * L * I <= ELEM_CAP]
                             or [1]))
    while O * L * I > ELEM_CAP:
        I = max(1, I // 2)
    layout = draw(st.sampled_from(("c", "c", "offset", "rowslice")))
    ops = finalize_ops(layout_ops(layout, 3, lambda lo, hi: draw(st.integers(lo, hi))), (O, L, I))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    base = build_base(rng, (O, L, I), ops, tin, axis=1)
    run_case(base, ops, 1, log, tout, draw(st.sampled_from((None, "view"))))


# ----------------------------------------------------------------------------
# Special values
# ----------------------------------------------------------------------------
@pytest.mark.gpu
@settings(max_examples=n_examples(120), phases=PHASES)
@given(data=st.data())
def test_special_values(data):
    draw = data.draw
    devname = draw(st.sampled_from(DEVICES))
    tin, tout = dtype_pair(draw)
    log = draw(st.booleans())
    special = draw(st.sampled_from(SPECIALS[1:]))
    with _maybe_fake(devname) as dev:
        L = draw(st.one_of(st.sampled_from(row_lengths(tin, tout, dev, max_len=1 << 18)),
                           st.integers(1, 200)))
        R = draw(st.integers(1, max(1, min(64, ELEM_CAP // L))))
        layout = draw(st.sampled_from(("c", "f", "neg", "offset")))
        ops = finalize_ops(layout_ops(layout, 2, lambda lo, hi: draw(st.integers(lo, hi))), (R, L))
        algorithm = draw(st.sampled_from(("auto", "auto", "auto", "safe", "online")))
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        base = build_base(rng, (R, L), ops, tin, special)
        event(f"special={special}")
        run_case(base, ops, -1, log, tout, draw(st.sampled_from((None, "fresh"))), algorithm,
                 ctx=f"[{devname} {special}]")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("log", [False, True])
def test_special_rows_exact_rules(dtype, log):
    """The documented rules, exactly: -inf element -> 0 (log: -inf); a row of
    all -inf, or with NaN or +inf -> all NaN; one finite element -> 1 (log 0)."""
    import cupy
    ninf, inf, nan = -np.inf, np.inf, np.nan
    rows = [[1.0, ninf, 2.0, 0.5], [ninf] * 4, [0.0, nan, 1.0, 2.0], [0.0, inf, 1.0, 2.0],
            [ninf, 3.0, ninf, ninf], [inf, inf, inf, inf], [nan, ninf, inf, 0.0], [7.0] * 4]
    xh = np.array(rows).astype(np_dtype(dtype))
    for L in (4, 1000, 70000):  # warp, block, block/cluster/split regimes
        big = np.full((len(rows), L), -np.inf).astype(np_dtype(dtype))
        big[:, :4] = xh
        big[7] = 7.0
        y = reference.to_float64(_fn(log)(cupy.asarray(big)))
        assert np.isnan(y[[1, 2, 3, 5, 6]]).all()
        assert not np.isnan(y[[0, 4, 7]]).any()
        if log:
            assert np.isneginf(y[0, 1]) and np.isneginf(y[0, 4:]).all() and y[4, 1] == 0.0
        else:
            assert y[0, 1] == 0.0 and (y[0, 4:] == 0.0).all() and y[4, 1] == 1.0
        check_forward(y, big, -1, log, ctx=f"L={L}")


# ----------------------------------------------------------------------------
# Shift invariance: x + c exactly representable, so y(x + c) = y(x)
# ----------------------------------------------------------------------------
@pytest.mark.gpu
@settings(max_examples=n_examples(60), phases=PHASES)
@given(data=st.data())
def test_shift_invariance(data):
    import cupy
    draw = data.draw
    tin, tout = dtype_pair(draw)
    log = draw(st.booleans())
    # grid step and shift range keep every x and x + c exact in the dtype
    step, kmax, cs = {"float16": (1 / 8, 64, list(range(-50, 51, 7))),
                      "bfloat16": (1 / 2, 32, list(range(-96, 97, 16))),
                      "float32": (1 / 8, 64, [-1e6, -1e4, -77.0, 3.0, 1e4, 1e6]),
                      "float64": (1 / 8, 64, [-1e12, -1e4, 5.0, 1e6, 1e12])}[tin]
    c = draw(st.sampled_from(cs))
    dev = real_device_info()
    L = draw(st.one_of(st.sampled_from(row_lengths(tin, tout, dev, max_len=1 << 18)), st.integers(1, 500)))
    R = draw(st.integers(1, max(1, min(20, ELEM_CAP // L))))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    xv = rng.integers(-kmax, kmax + 1, size=(R, L)) * step
    x1 = xv.astype(np_dtype(tin))
    x2 = (xv + c).astype(np_dtype(tin))
    assert np.array_equal(x2.astype(np.float64) - c, x1.astype(np.float64)), "shift not exact"
    kw = {"dtype": np_dtype(tout)} if tout else {}
    y1 = reference.to_float64(_fn(log)(cupy.asarray(x1), **kw))
    y2 = reference.to_float64(_fn(log)(cupy.asarray(x2), **kw))
    event("bitwise equal" if np.array_equal(y1, y2) else "equal within tolerance")
    # both are within tolerance of the same reference: compare at twice it
    if log:
        lim = 2 * tolerance(tin, tout, L, log=True) * np.maximum(1, np.abs(y1))
    else:
        atol, rtol = tolerance(tin, tout, L)
        lim = 2 * (atol + rtol * np.abs(y1))
    assert (np.abs(y1 - y2) <= lim).all(), f"shift {c} changed the result: max diff {np.abs(y1 - y2).max()}"
    check_forward(y2, x2, -1, log, out_dtype=tout)


# ----------------------------------------------------------------------------
# The paper's streaming algorithms
# ----------------------------------------------------------------------------
@pytest.mark.gpu
@settings(max_examples=n_examples(80), phases=PHASES)
@given(data=st.data())
def test_algorithms(data):
    draw = data.draw
    algorithm = draw(st.sampled_from(("naive", "safe", "online", "auto")))
    tin, tout = dtype_pair(draw)
    log = draw(st.booleans())
    dev = real_device_info()
    o = tout or tin
    chunks = []
    for pack in (_dispatch.pack_width(tin, o), 1):
        c = _dispatch.STREAM_THREADS * _dispatch.STREAM_UNROLL * pack
        chunks += [c - 1, c, c + 1, 2 * c + 1, pack - 1, pack + 1]
    L = draw(st.one_of(st.sampled_from([v for v in chunks if v >= 1]),
                       st.sampled_from(row_lengths(tin, tout, dev, max_len=1 << 18)), st.integers(1, 5000)))
    R = draw(st.integers(1, max(1, min(40, ELEM_CAP // L))))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    layout = draw(st.sampled_from(("c", "rowslice", "offset", "f")))
    ops = finalize_ops(layout_ops(layout, 2, lambda lo, hi: draw(st.integers(lo, hi))), (R, L))
    if algorithm == "naive":
        # Algorithm 1 has no max subtraction: keep sum(exp(x)) finite in float32
        hi = min(79.0, 87.0 - math.log(L) - 1.0)
        bshape = base_shape_for((R, L), ops)
        base = rng.uniform(-hi, hi, size=bshape).astype(np_dtype(tin))
        special = "normal"
    else:
        special = draw(st.sampled_from(("normal", "normal", "neg_inf_one", "nan", "huge", "equal")))
        base = build_base(rng, (R, L), ops, tin, special)
    event(f"algorithm={algorithm}")
    run_case(base, ops, -1, log, tout, draw(st.sampled_from((None, "fresh"))), algorithm)


# ----------------------------------------------------------------------------
# Deterministic checks at the few-rows boundary, on the real device
# ----------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("delta", [-1, 0, 1])
@pytest.mark.parametrize("log", [False, True])
def test_few_rows_boundary_long_rows(delta, log):
    """Long rows (past every on-chip regime) at FEW_ROWS_PER_SM x SMs +-1:
    split below, stream at and above."""
    dev = real_device_info()
    thr = _dispatch.row_thresholds("float32", "float32", dev)
    L = max(max(v for k, v in thr.items() if k not in _dispatch.ROW_THRESHOLD_EXTRAS),
            thr.get("cluster_waves", 0)) + 1
    R = thr["few_rows"] + delta
    rng = np.random.default_rng(delta + 10)
    base = (rng.standard_normal((R, L)) * 5).astype(np.float32)
    _, regime = run_case(base, [], -1, log, None, "fresh" if delta == 0 else None)
    assert regime == ("split" if delta < 0 else "stream")


@pytest.mark.gpu
@pytest.mark.parametrize("log", [False, True])
def test_few_rows_cluster_waves(log):
    """Few float32 rows too long for a block, too many for every row's
    cluster at once (FEW_CLUSTER_WAVES_MIN_ROWS .. few rows - 1): a cluster
    per row in several waves, checked against the reference (special values
    included); one row fewer splits."""
    dev = real_device_info()
    thr = _dispatch.row_thresholds("float32", "float32", dev)
    if "cluster_waves" not in thr:
        pytest.skip("no thread-block clusters on this device")
    longest = max(v for k, v in thr.items() if k not in _dispatch.ROW_THRESHOLD_EXTRAS)
    cwr = thr["cluster_waves_rows"]
    for R, L, want in ((cwr, thr["cluster_waves"], "cluster"), (thr["few_rows"] - 1, longest + 1, "cluster"),
                       (cwr - 1, longest + 1, "split")):
        rng = np.random.default_rng(R + L)
        base = (rng.standard_normal((R, L)) * 5).astype(np.float32)
        base[1, 7] = -np.inf
        base[2, :] = -np.inf
        base[3, L // 2] = np.nan
        _, regime = run_case(base, [], -1, log, None, None)
        assert regime == want, (R, L, regime)


@pytest.mark.gpu
@pytest.mark.parametrize("regime_dev", ["real", "sm80"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_misaligned_16bit_views_every_regime(regime_dev, dtype):
    """x[1:] and odd element offsets in 16-bit types: rows start mid-vector,
    at a different misalignment per row when L is odd."""
    with _maybe_fake(regime_dev) as dev:
        thr = _dispatch.row_thresholds(dtype, dtype, dev)
        seen = set()
        for L in sorted({5, thr["warp"] - 3, thr["warp"] + 1, thr["block"] - 1,
                         thr.get("cluster", thr["block"]) + 1}):
            R = 3
            for ops in ([("slice", 0, 1, None, 1)], [("flat", 1, (R, L))], [("flat", 3, (R, L))]):
                rng = np.random.default_rng(L)
                base = build_base(rng, (R, L), ops, dtype)
                for log in (False, True):
                    _, regime = run_case(base, ops, -1, log, None, "view")
                    seen.add(regime)
    assert {"warp", "block"} <= seen


# ----------------------------------------------------------------------------
# Regressions found by tools/fuzz.py (seed 1)
# ----------------------------------------------------------------------------
FUZZ_REGRESSIONS = [
    # the copy layout (strides no kernel takes) ran the rows kernel as if
    # every row of the contiguous copy started on a 16-byte boundary: rows
    # whose length is not a multiple of the vector width lost elements
    ("case338-fortran-fresh-out", (32, 4, 31), -1, "float32", None, False, [("T",)], "fresh"),
    ("case942-fortran-axis0", (767, 6), 0, "float32", None, True, [("T",)], "fresh"),
    ("case676-reversed-axis0", (255, 20), 0, "bfloat16", None, False, [("slice", 1, None, None, -1)], "fresh"),
    ("case798-tuple-axes-inplace", (85, 2, 16, 3), (0, 3), "bfloat16", None, False, [], "inplace"),
    ("case700-stepped-rows", (20, 1023), 1, "float16", "float32", True, [("slice", 1, None, None, -2)], "fresh"),
    ("case303-reversed-step-inplace", (5, 47), 0, "float16", None, False, [("slice", 1, None, None, -2)],
     "inplace"),
]


@pytest.mark.gpu
@pytest.mark.parametrize("case", FUZZ_REGRESSIONS, ids=[c[0] for c in FUZZ_REGRESSIONS])
def test_fuzz_regressions(case):
    _, shape, axis, tin, tout, log, ops, out_mode = case
    rng = np.random.default_rng(338)
    base = build_base(rng, shape, ops, tin, axis=axis)
    run_case(base, ops, axis, log, tout, out_mode)


_SMEM_MIXED = r"""
import sys, numpy as np, cupy, cusoftmax
from cusoftmax import reference
rng = np.random.default_rng(0)
for tin in ("bfloat16", "float16", "float32"):
    if tin == "bfloat16":
        import ml_dtypes
        xh = rng.standard_normal((1000, 4096)).astype(ml_dtypes.bfloat16)
    else:
        xh = rng.standard_normal((1000, 4096)).astype(tin)
    y = cusoftmax.softmax(cupy.asarray(xh), dtype=cupy.float64)
    err = np.abs(y.get() - reference.softmax(xh)).max()
    assert err < 1e-12, (tin, err)
print("ok")
"""


@pytest.mark.gpu
def test_fuzz_case_7503_mixed_dtype_staged_rows():
    """fuzz seed 3 case 7503: many rows of 4096 16/32-bit logits with a
    float64 result (pack width 2) took the shared-memory staging kernel,
    whose cp.async moves 16 bytes per pack while a pack holds only
    sizeof(T) * 2: cudaErrorMisalignedAddress, a sticky error that loses the
    CUDA context. Run in a subprocess so a failure cannot poison this one."""
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run([sys.executable, "-c", _SMEM_MIXED], capture_output=True, text=True, timeout=300,
                       cwd=root, env=dict(os.environ, PYTHONPATH=root))
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-2000:]


# ----------------------------------------------------------------------------
# Regimes (CPU): which plan chosen shapes take
# ----------------------------------------------------------------------------
DEVS = [DeviceInfo(132, 90), DeviceInfo(108, 80)]
PAIRS = [(a, b) for a in DTYPES for b in DTYPES]


KNOWN_REGIMES = {"warp", "block", "smem", "cluster", "rowsync", "split", "stream"}
ON_CHIP = {"warp", "block", "smem", "cluster", "rowsync"}
EXTRAS = _dispatch.ROW_THRESHOLD_EXTRAS


def _regime(dev, tin, tout, R, L, **kw):
    return _dispatch.plan_rows(R, L, tin, tout, False, dev, **kw).regime


@pytest.mark.parametrize("dev", DEVS, ids=["H100", "A100"])
@pytest.mark.parametrize("tin,tout", PAIRS)
def test_regimes(dev, tin, tout):
    """Which regime chosen shapes take (derived from row_thresholds): short
    rows a warp; rows past every on-chip capacity of a many-rows regime go
    to the one-launch rowsync kernel while they are at most ``rowsync_rows``
    and fit on the GPU, are split when there are fewer than FEW_ROWS_PER_SM
    x SMs of them and stream otherwise; the paper's algorithms always
    stream; no clusters below sm_90."""
    thr = _dispatch.row_thresholds(tin, tout, dev)
    few = thr["few_rows"]
    many = 10 * few
    longest = max(v for k, v in thr.items() if k not in EXTRAS)
    for L in (1, 2, 7, 32):
        assert _regime(dev, tin, tout, many, L) == "warp"
        assert _regime(dev, tin, tout, 1, L) == "warp"
    if "rowsync" in thr:
        R = thr["rowsync_rows"]
        assert _regime(dev, tin, tout, 1, thr["rowsync"]) == "rowsync"
        assert _regime(dev, tin, tout, 1, thr["rowsync"] + 1) == "split"
        fits = 4 * longest <= thr["rowsync"] // dev.sm_count * (dev.sm_count // R)  # R rows: SMs / R blocks each
        assert _regime(dev, tin, tout, R, 4 * longest) == ("rowsync" if fits else "split")
        assert _regime(dev, tin, tout, R + 1, 4 * longest) != "rowsync"
    for L in (4 * longest, 10 ** 7):
        one = "rowsync" if L <= thr.get("rowsync", 0) else "split"
        assert _regime(dev, tin, tout, 1, L) == one, L
        assert _regime(dev, tin, tout, few - 1, L) == "split", L
        assert _regime(dev, tin, tout, few, L) == "stream", L
        assert _regime(dev, tin, tout, many, L) == "stream", L
    for L in (1, thr["warp"], thr["block"], longest, 10 ** 7):
        for alg in ("naive", "safe", "online"):
            for R in (1, many):
                p = _dispatch.plan_rows(R, L, tin, tout, True, dev, alg)
                assert p.regime == "stream" and alg.upper() in p.kernel, p.kernel
    if not dev.has_clusters:
        assert "cluster" not in thr


@pytest.mark.parametrize("dev", DEVS, ids=["H100", "A100"])
@pytest.mark.parametrize("tin,tout", PAIRS)
def test_row_thresholds_warp_limit_matches_plan(dev, tin, tout):
    """row_thresholds()["warp"] is documented as the longest row of the warp
    regime: it must agree with plan_rows (many rows, aligned)."""
    thr = _dispatch.row_thresholds(tin, tout, dev)
    many = max(10 * thr["few_rows"], _dispatch.WARP_LONG_MIN_ROWS_LOG)
    assert _regime(dev, tin, tout, many, thr["warp"]) == "warp"
    assert _regime(dev, tin, tout, many, thr["warp"] + 1) != "warp"
    if "warp_few" in thr:  # 32-bit rows, fewer of them: the block kernel sooner
        for R in (1, 10 * thr["few_rows"], _dispatch.WARP_LONG_MIN_ROWS - 1):
            assert _regime(dev, tin, tout, R, thr["warp_few"]) == "warp"
            assert _regime(dev, tin, tout, R, thr["warp_few"] + 1) != "warp"
            p = _dispatch.plan_rows(R, thr["warp"], tin, tout, True, dev)
            assert p.regime != "warp"
        p = _dispatch.plan_rows(_dispatch.WARP_LONG_MIN_ROWS, thr["warp"], tin, tout, False, dev)
        assert p.regime == "warp"
        p = _dispatch.plan_rows(_dispatch.WARP_LONG_MIN_ROWS, thr["warp"], tin, tout, True, dev)
        assert p.regime != "warp"


@pytest.mark.parametrize("dev", DEVS, ids=["H100", "A100"])
@pytest.mark.parametrize("tin,tout", PAIRS)
def test_row_thresholds_longest_on_chip_row(dev, tin, tout):
    """The largest length of row_thresholds() (rowsync aside) is the longest
    row a many-rows regime holds on chip: one element more, and many rows
    stream; few rows (too many for rowsync) split."""
    thr = _dispatch.row_thresholds(tin, tout, dev)
    longest = max(v for k, v in thr.items() if k not in EXTRAS)
    many = 10 * thr["few_rows"]
    assert _regime(dev, tin, tout, many, longest) in ON_CHIP
    assert _regime(dev, tin, tout, many, longest + 1) == "stream"
    few1 = thr["few_rows"] - 1
    if "cluster_waves" in thr:  # 32-bit rows: clusters in waves from cluster_waves_rows rows on
        cw, cwr = thr["cluster_waves"], thr["cluster_waves_rows"]
        assert longest + 1 <= cw
        for R in (cwr, few1):
            assert _regime(dev, tin, tout, R, longest + 1) == "cluster"
            assert _regime(dev, tin, tout, R, cw) == "cluster"
            assert _regime(dev, tin, tout, R, cw + 1) == "split"
        assert _regime(dev, tin, tout, cwr - 1, longest + 1) == "split"
    else:  # 16-bit rows from FEW_STREAM_MIN_ROWS_16 rows on stream while short enough
        pack = _dispatch.pack_width(tin, tout)
        short = pack >= 8 and -(-(longest + 1) // pack) <= _dispatch.FEW_STREAM_MAX_PACKS_16
        assert _regime(dev, tin, tout, few1, longest + 1) == ("stream" if short else "split")
        assert _regime(dev, tin, tout, _dispatch.FEW_STREAM_MIN_ROWS_16 - 1, longest + 1) == "split"


@pytest.mark.parametrize("dev", DEVS, ids=["H100", "A100"])
@pytest.mark.parametrize("dt", ["bfloat16", "float16"])
def test_few_16bit_rows_stream_from_min_rows(dev, dt):
    """Few 16-bit rows beyond the on-chip regimes: the split below
    FEW_STREAM_MIN_ROWS_16 rows or beyond FEW_STREAM_MAX_PACKS_16 packs, the
    one-block-per-row stream otherwise (up to the few-rows bound)."""
    lo, few = _dispatch.FEW_STREAM_MIN_ROWS_16, _dispatch.FEW_ROWS_PER_SM * dev.sm_count
    L = _dispatch.FEW_STREAM_MAX_PACKS_16 * _dispatch.pack_width(dt, dt)
    assert L > _dispatch.row_thresholds(dt, dt, dev)["block"]  # past a block's registers
    for log in (False, True):
        for R, L_, want in ((lo - 1, L, "split"), (lo, L, "stream"), (few - 1, L, "stream"),
                            (lo, L + 1, "split"), (few - 1, L // 2, "stream")):
            got = _dispatch.plan_rows(R, L_, dt, dt, log, dev).regime
            assert got == want, (R, L_, log, got)


@pytest.mark.parametrize("dev", DEVS, ids=["H100", "A100"])
def test_plans_are_valid(dev):
    """Every plan over a sweep of shapes respects CUDA's and the kernels'
    limits: <= 1024 threads; warp kernels with LANES a power of two <= 32 and
    NP on the ladder; grid-stride grids capped at MAX_BLOCKS_PER_SM per SM;
    clusters of <= MAX_CLUSTER dividing the grid, none below sm_90; split
    grids (splits, rows) with rows <= 65535 and a 2 x rows x splits workspace;
    dynamic shared memory within the 227 KiB a block may use."""
    rng = np.random.default_rng(0)
    for tin in DTYPES:
        Ls = sorted(set(row_lengths(tin, None, dev)) | set(int(v) for v in rng.integers(1, 10 ** 7, 100)))
        for L in Ls:
            for R in (1, 3, dev.sm_count // 4, dev.sm_count - 1, dev.sm_count, 10 ** 6, 2 ** 31):
                for vec, mis in ((True, False), (True, True), (False, False)):
                    p = _dispatch.plan_rows(R, L, tin, tin, False, dev, "auto", vec, mis)
                    ctx = (tin, R, L, vec, mis, p)
                    assert p.regime in KNOWN_REGIMES, ctx
                    assert p.block[0] <= _dispatch.MAX_BLOCK_THREADS, ctx
                    args = p.kernel.rstrip(">").split("<", 1)[1].split(", ")
                    if p.regime == "warp":
                        lanes, np_ = int(args[-1]), int(args[-2])
                        assert lanes in (1, 2, 4, 8, 16, 32) and np_ in _dispatch.NP_LADDER, ctx
                    if p.regime == "split":
                        assert p.grid[1] == R <= 65535 and p.ws_elems == 2 * R * p.grid[0], ctx
                    else:
                        assert p.grid[0] <= dev.sm_count * _dispatch.MAX_BLOCKS_PER_SM, ctx
                    if "cluster" in p.kernel.split("<")[0] or p.regime == "cluster":
                        c = int(args[-1])
                        assert dev.has_clusters and c <= _dispatch.MAX_CLUSTER and p.grid[0] % c == 0, ctx
                    c = getattr(p, "cluster", 1)  # persistent clustered grids
                    assert c == 1 or (dev.has_clusters and p.grid[0] % c == 0), ctx
                    assert getattr(p, "smem", 0) <= 227 * 1024, ctx


@pytest.mark.parametrize("dev", DEVS, ids=["H100", "A100"])
def test_compile_check_covers_every_plan(dev):
    """Every kernel the dispatcher picks for a sweep of shapes is in
    ``all_forward_kernels`` (so the NVRTC compile check covers it)."""
    known = {k for _, k in _dispatch.all_forward_kernels(dev)}
    rng = np.random.default_rng(1)
    Ls = sorted(set(int(v) for v in rng.integers(1, 600000, 150)) | {1, 2, 3, 7, 10 ** 7})
    for tin in DTYPES:
        for tout in DTYPES:
            for L in Ls:
                for R in (1, 3, dev.sm_count // 4, dev.sm_count, 10 ** 5):
                    for vec, mis in ((True, False), (True, True), (False, False)):
                        for alg in _dispatch.ALGORITHMS:
                            p = _dispatch.plan_rows(R, L, tin, tout, True, dev, alg, vec, mis)
                            for k in p.kernels():
                                assert k in known, (tin, tout, L, R, vec, mis, alg, k)
            for O, L, I in ((1, 5, 3), (100, 5000, 64), (2, 100000, 1)):
                p = _dispatch.plan_cols(O, L, I, tin, tout, False, dev)
                assert p.kernel in known


# ----------------------------------------------------------------------------
# Large arrays (64-bit indexing)
# ----------------------------------------------------------------------------
def _free():
    import cupy
    cupy.get_default_memory_pool().free_all_blocks()


@pytest.mark.gpu
@pytest.mark.slow
def test_more_than_2_31_elements():
    """float16 (R, 1000) with R * 1000 > 2^31: rows past element 2^31 (and
    the row straddling it) are correct; every row sums to 1."""
    import cupy
    L = 1000
    R = (2 ** 31) // L + 1 + 512
    assert R * L > 2 ** 31
    x = cupy.empty((R, L), cupy.float16)
    rs = cupy.random.RandomState(7)
    step = 1 << 17
    for r0 in range(0, R, step):
        r1 = min(R, r0 + step)
        x[r0:r1] = (rs.standard_normal((r1 - r0, L), dtype=cupy.float32) * 4).astype(cupy.float16)
    try:
        for log in (False, True):
            y = _fn(log)(x)
            straddle = (2 ** 31) // L
            rows = [0, 1, straddle - 1, straddle, straddle + 1, R // 2, R - 2, R - 1]
            check_forward(y[rows], host(x[rows]), -1, log, ctx=f"{R}x{L} rows {rows}")
            if not log:
                s = cupy.sum(y, axis=1, dtype=cupy.float32)
                dev = float(cupy.max(cupy.abs(s - 1)))
                assert dev < 2e-3, f"some row sums to 1 +- {dev}"
            del y
            _free()
    finally:
        del x
        _free()


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["auto", "online"])
def test_row_longer_than_2_31(algorithm):
    """One float16 row of 2^31 + 2^20 + 3 elements (~4.3 GB): a periodic
    pattern with distinct values planted around element 2^31 and at the ends,
    so any 32-bit index wrap reads or writes the wrong value. The normaliser
    is known exactly (counts of each residue), so the host never holds the
    row."""
    import cupy
    L = 2 ** 31 + 2 ** 20 + 3
    P = 7
    fill = cupy.ElementwiseKernel("", "float16 x", "x = (float16)((float)(i % 7) * 0.25f)",
                                  "cusoftmax_test_pattern")
    x = cupy.empty((1, L), cupy.float16)
    try:
        fill(x)
        planted = {0: 3.0, 1: -2.0, 2 ** 31 - 1: 2.5, 2 ** 31: 1.75, 2 ** 31 + 1: -1.0,
                   L // 2: 2.75, L - 2: 2.25, L - 1: 3.25}
        idx = cupy.asarray(list(planted), dtype=cupy.int64)
        x[0, idx] = cupy.asarray(list(planted.values()), dtype=cupy.float16)
        # exact normaliser in float64: residues minus the planted positions
        m = max(max(planted.values()), (P - 1) * 0.25)
        counts = [(L - r + P - 1) // P for r in range(P)]
        for i in planted:
            counts[i % P] -= 1
        D = sum(c * math.exp(r * 0.25 - m) for r, c in enumerate(counts))
        D += sum(math.exp(v - m) for v in planted.values())
        sample = sorted(set(list(planted) + [3, 4, 2 ** 31 - 7, 2 ** 31 + 2, 2 ** 31 + 5, L // 3, L - 9]
                            + [int(v) for v in np.random.default_rng(0).integers(0, L, 40)]))

        def xval(i):
            return planted.get(i, (i % P) * 0.25)

        y = cusoftmax.softmax(x, dtype=cupy.float32, algorithm=algorithm)
        got = y[0, cupy.asarray(sample, dtype=cupy.int64)].get().astype(np.float64)
        want = np.array([math.exp(xval(i) - m) / D for i in sample])
        atol, rtol = tolerance("float16", "float32", L)
        assert np.all(np.abs(got - want) <= atol + rtol * want), (sample, got, want)
        total = float(cupy.sum(y, dtype=cupy.float64))
        assert abs(total - 1) < 1e-5 + 3 * rtol, total
        del y
        _free()
        yl = cusoftmax.log_softmax(x, algorithm=algorithm)
        got = yl[0, cupy.asarray(sample, dtype=cupy.int64)].get().astype(np.float64)
        want = np.array([xval(i) - m - math.log(D) for i in sample])
        tl = tolerance("float16", "float16", L, log=True)
        assert np.all(np.abs(got - want) <= tl * np.maximum(1, np.abs(want))), (sample, got, want)
        del yl
    finally:
        del x
        _free()


def _cols_special_input(rng, shape, dtype):
    """Random (O, L, I) logits reduced over L with special columns: 1 all NaN,
    2 one +inf, 3 all -inf, 4 one -inf."""
    L = shape[1]
    xh = (rng.standard_normal(shape) * 3).astype(np_dtype(dtype))
    xh[:, :, 1] = np.nan
    xh[0, 5, 2] = np.inf
    xh[:, :, 3] = -np.inf
    xh[0, L // 2, 4] = -np.inf
    return xh


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,out_dtype", [("float32", None), ("bfloat16", None), ("float16", None),
                                             ("float32", "bfloat16")])
@pytest.mark.parametrize("log", [False, True])
def test_cols_sync(dtype, out_dtype, log):
    """softmax_cols_sync (one cooperative launch, per-tile barrier): shapes the
    dispatcher sends to it, and every NR forced over one round and several
    (whole tiles a round, the next item prefetched), inner extents not a
    multiple of the tile, axes not a multiple of a block's rows, several
    outer slices, special columns (NaN, +inf, all -inf, one -inf)."""
    import cupy as cp
    from cusoftmax._launch import Launch

    dev = real_device_info()
    odt = out_dtype or dtype
    isz, osz = np.dtype(np_dtype(dtype)).itemsize, np.dtype(np_dtype(odt)).itemsize
    v = 16 // max(isz, osz)
    rng = np.random.default_rng(7)
    # (1, 40000, 72): 79 blocks a tile at NR 16, the last tile 8 columns wide
    cases = [(1, 1000, 1000), (2, 700, 136), (1, 2048, 520), (3, 1500, 264), (1, 40000, 72)]
    for O, L, I in cases:
        xh = _cols_special_input(rng, (O, L, I), dtype)
        x = cp.asarray(xh)
        plans = [_dispatch.plan_cols(O, L, I, dtype, odt, log, dev, v)]
        for nr in _dispatch.COLS_SYNC_NR:
            p = _dispatch._plan_cols_sync(O, L, I, dtype, odt, log, dev, v, nr)
            if p is not None:
                plans.append(p)
                splits, tiles = p.extra[1], p.extra[2]
                if tiles >= 2:  # several rounds: a quarter of the tiles a round
                    plans.append(dataclasses.replace(p, grid=(max(1, tiles // 4) * splits,)))
        ran = 0
        for p in plans:
            if not p.kernel.startswith("softmax_cols_sync"):
                continue
            y = cp.full((O, L, I), np.nan, dtype=np_dtype(odt))
            Launch(p, x.data.device_id).cols(x.data.ptr, y.data.ptr, O, L, I, L * I, I, L * I, I)
            check_forward(y, xh, axis=1, log=log, out_dtype=odt, ctx=f"{p.kernel} grid {p.grid} {(O, L, I)}")
            ran += 1
        assert ran >= 2, (O, L, I, [p.kernel for p in plans])
        # and through the public API, whatever the dispatcher picks
        y = (cusoftmax.log_softmax if log else cusoftmax.softmax)(x, axis=1, dtype=out_dtype)
        check_forward(y, xh, axis=1, log=log, out_dtype=odt, ctx=f"api {(O, L, I)}")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64"])
def test_cols_split_many_splits(dtype):
    """The split stream over hundreds of blocks a tile (more than the sync
    kernel takes): the last block's merge of every partial (several loads in
    flight per thread, a partial last tile) and its per-tile counters, which
    the kernel leaves at zero: two calls in a row on one stream, then
    another shape, all checked."""
    import cupy as cp

    dev = real_device_info()
    rng = np.random.default_rng(11)
    for O, L, I in ((1, 300000, 24), (2, 150000, 40), (1, 300000, 24)):
        p = _dispatch.plan_cols(O, L, I, dtype, dtype, False, dev, 16 // np.dtype(np_dtype(dtype)).itemsize)
        assert p.kernel.startswith("softmax_cols_split_finish") and p.grid[1] >= 128, p
        xh = _cols_special_input(rng, (O, L, I), dtype)
        x = cp.asarray(xh)
        for log in (False, True, False):
            y = (cusoftmax.log_softmax if log else cusoftmax.softmax)(x, axis=1)
            check_forward(y, xh, axis=1, log=log, out_dtype=dtype, ctx=f"{p.kernel} {(O, L, I)} log={log}")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("log", [False, True])
def test_cols_cl(dtype, log):
    """softmax_cols_cl (sm_90: a thread-block cluster a tile, partials by
    st.async into every block's shared memory): every NR whose cluster has
    at most 8 blocks forced on each shape (clusters of 1, 2, 4 and 8 blocks,
    blocks with no rows of the axis, axes not a multiple of a block's rows,
    inner extents not a multiple of the tile, several outer slices), special
    columns (NaN, +inf, all -inf, one -inf), output poisoned first; two tiles
    a cluster (NT = 2, odd tile counts included); then the public call."""
    import cupy as cp
    from cusoftmax._launch import Launch

    dev = real_device_info()
    if dev.cc < 90:
        pytest.skip("softmax_cols_cl needs sm_90 (thread-block clusters)")
    v = 16 // np.dtype(np_dtype(dtype)).itemsize
    rng = np.random.default_rng(11)
    seen, seen_half = set(), set()
    for O, L, I in [(1, 1000, 1000), (2, 700, 136), (1, 130, 520), (3, 1500, 264), (2, 300, 24), (1, 129, 8),
                    (1, 2000, 104), (1, 400, 72)]:
        xh = _cols_special_input(rng, (O, L, I), dtype)
        x = cp.asarray(xh)
        ran = 0
        for nr in _dispatch.COLS_CL_NR:
            p = _dispatch._plan_cols_cl(O, L, I, dtype, dtype, log, dev, v, nr)
            if p is None:
                continue
            seen.add(p.extra[1])
            y = cp.full((O, L, I), np.nan, dtype=np_dtype(dtype))
            Launch(p, x.data.device_id).cols(x.data.ptr, y.data.ptr, O, L, I, L * I, I, L * I, I)
            check_forward(y, xh, axis=1, log=log, ctx=f"{p.kernel} grid {p.grid} {(O, L, I)}")
            ran += 1
        # 8-byte packs at COLS_CL_HALF_NR (the dispatcher's half-pack plans)
        p = _dispatch._plan_cols_cl(O, L, I, dtype, dtype, log, dev, v, _dispatch.COLS_CL_HALF_NR, v=v // 2)
        if p is not None:
            seen_half.add(p.extra[1])
            y = cp.full((O, L, I), np.nan, dtype=np_dtype(dtype))
            Launch(p, x.data.device_id).cols(x.data.ptr, y.data.ptr, O, L, I, L * I, I, L * I, I)
            check_forward(y, xh, axis=1, log=log, ctx=f"{p.kernel} grid {p.grid} {(O, L, I)}")
        assert ran >= 1, (O, L, I)
        # two tiles a cluster (the kernel's NT = 2; the dispatcher keeps 1)
        p = _dispatch._plan_cols_cl(O, L, I, dtype, dtype, log, dev, v, nt=2)
        y = cp.full((O, L, I), np.nan, dtype=np_dtype(dtype))
        Launch(p, x.data.device_id).cols(x.data.ptr, y.data.ptr, O, L, I, L * I, I, L * I, I)
        check_forward(y, xh, axis=1, log=log, ctx=f"{p.kernel} grid {p.grid} {(O, L, I)}")
        y = (cusoftmax.log_softmax if log else cusoftmax.softmax)(x, axis=1)
        check_forward(y, xh, axis=1, log=log, ctx=f"api {(O, L, I)}")
    assert seen == {1, 2, 4, 8}, seen
    assert seen_half == {1, 2, 4, 8}, seen_half
    # over COLS_CL_MAX_BYTES with an axis shorter than a sync block's rows:
    # the public call takes the cluster kernel at 8-byte packs, NR 16
    # (COLS_CL_HALF_NR), in a cluster of 2
    O, L, I = 1, 300, 8192 if dtype != "float32" else 4096
    p = _dispatch.plan_cols(O, L, I, dtype, dtype, log, dev, v)
    assert p.kernel.startswith("softmax_cols_cl") and f", {v // 2}, 256, 16, 2," in p.kernel, p
    assert p.extra[1:] == (2, I // (128 // x.dtype.itemsize), 16), p
    xh = _cols_special_input(rng, (O, L, I), dtype)
    y = (cusoftmax.log_softmax if log else cusoftmax.softmax)(cp.asarray(xh), axis=1)
    check_forward(y, xh, axis=1, log=log, ctx=f"api {(O, L, I)} {p.kernel}")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.usefixtures("no_cl16")
def test_cols_narrow(dtype, log):
    """Unit-stride axes that take packs narrower than 16 bytes (odd I,
    16-bit I a multiple of 4 but not 8, float32 I even but not a multiple of
    4): softmax_cols_cl with scalars and (16-bit) 8-byte packs at every NR of
    COLS_NARROW_NR whose cluster has at most 8 blocks (clusters of 1-8, in
    the sizes of COLS_CL_CLUSTERS and, at COLS_NARROW_MINB's blocks an SM, of
    COLS_NARROW_CLUSTERS; 8-byte packs also on the small-array form's
    narrower tiles; 16-bit 4-byte packs on _cols_fill4's 8-lane tiles at
    COLS_FILL4_NR and COLS_FILL4_LONG_NR), softmax_cols_sync with scalars (no prefetch) over one round and several,
    special columns, output poisoned first; then the public call, and the
    dispatcher's choice on those shapes is one of the narrow plans."""
    import cupy as cp
    from cusoftmax._launch import Launch

    dev = real_device_info()
    if dev.cc < 90:
        pytest.skip("the narrow-pack plans are sm_90's (softmax_cols_cl needs clusters)")
    isz = np.dtype(np_dtype(dtype)).itemsize
    rng = np.random.default_rng(13)
    seen = set()
    cases = [(1, 1000, 1001), (2, 333, 301), (1, 700, 1500 if isz == 2 else 1502), (3, 130, 37),
             (1, 4000, 201), (1, 129, 9), (2, 2600, 44 if isz == 2 else 46), (1, 4000, 300 if isz == 2 else 302)]
    for O, L, I in cases:
        vec = 16 // isz
        while vec > 1 and I % vec:
            vec //= 2
        assert vec * isz < 16, (O, L, I)
        xh = _cols_special_input(rng, (O, L, I), dtype)
        x = cp.asarray(xh)
        plans = []
        for v in sorted({vec, 1}):
            for nr in _dispatch.COLS_NARROW_NR:
                mb = _dispatch.COLS_NARROW_MINB.get((dtype, v, nr))
                for cls, minb in ((_dispatch.COLS_CL_CLUSTERS, None), (_dispatch.COLS_NARROW_CLUSTERS, mb)):
                    p = _dispatch._plan_cols_cl(O, L, I, dtype, dtype, log, dev, vec, nr=nr, v=v, clusters=cls,
                                                minb=minb)
                    if (p is not None and not (nr > 16 and p.extra[1] == 1)  # (as the dispatcher)
                            and all(p.kernel != q.kernel or p.grid != q.grid for q in plans)):
                        plans.append(p)
                        seen.add(("cl", v == 1, p.extra[1]))
            # the small-array form (_cols_cl_small): narrower tiles, 8-byte 16-bit packs
            for seg in (_dispatch.COLS_CL_SMALL_SEGMENTS if v > 1 else ()):
                for nr in _dispatch.COLS_CL_SMALL_NARROW_NR:
                    p = _dispatch._plan_cols_cl(O, L, I, dtype, dtype, log, dev, vec, nr=nr, v=v, segment=seg,
                                                clusters=_dispatch.COLS_NARROW_CLUSTERS,
                                                minb=_dispatch.COLS_NARROW_MINB.get((dtype, v, nr)))
                    if p is not None and all(p.kernel != q.kernel or p.grid != q.grid for q in plans):
                        plans.append(p)
                        seen.add(("cl small", p.extra[0], p.extra[1]))
        if isz == 2 and vec == 4:  # 4-byte packs on 8-lane tiles (_cols_fill4, its NR and the long form's)
            for nr in (_dispatch.COLS_FILL4_NR, _dispatch.COLS_FILL4_LONG_NR):
                p = _dispatch._plan_cols_cl(O, L, I, dtype, dtype, log, dev, vec, nr=nr, v=2,
                                            segment=_dispatch.COLS_FILL4_SEGMENT,
                                            clusters=_dispatch.COLS_NARROW_CLUSTERS,
                                            minb=_dispatch.COLS_NARROW_MINB.get((dtype, 2, nr)))
                if (p is not None and not (nr > 16 and p.extra[1] == 1)
                        and all(p.kernel != q.kernel or p.grid != q.grid for q in plans)):
                    plans.append(p)
                    seen.add(("cl fill4", nr, p.extra[1]))
        p = _dispatch._plan_cols_sync(O, L, I, dtype, dtype, log, dev, vec, nr=_dispatch.COLS_NARROW_SYNC_NR, v=1)
        if p is not None and L >= p.block[0] // p.extra[0] * p.extra[3]:
            assert p.kernel.endswith("false>") and p.smem == 0, p  # no cp.async prefetch
            plans.append(p)
            seen.add(("sync", True))
            splits, tiles = p.extra[1], p.extra[2]
            if tiles >= 2:  # several rounds
                plans.append(dataclasses.replace(p, grid=(max(1, tiles // 4) * splits,)))
        auto = _dispatch.plan_cols(O, L, I, dtype, dtype, log, dev, vec)
        assert any(auto.kernel == p.kernel and auto.grid == p.grid for p in plans) or auto.pre_kernel, auto
        assert plans, (O, L, I)
        for p in plans:
            y = cp.full((O, L, I), np.nan, dtype=np_dtype(dtype))
            Launch(p, x.data.device_id).cols(x.data.ptr, y.data.ptr, O, L, I, L * I, I, L * I, I)
            check_forward(y, xh, axis=1, log=log, ctx=f"{p.kernel} grid {p.grid} {(O, L, I)}")
        y = (cusoftmax.log_softmax if log else cusoftmax.softmax)(x, axis=1)
        check_forward(y, xh, axis=1, log=log, ctx=f"api {(O, L, I)} {auto.kernel}")
    assert {c for k, *r in seen if k == "cl" for c in r[1:]} == {1, 2, 3, 4, 6, 8}, seen
    assert ("sync", True) in seen and ("cl", True, 8) in seen and ("cl", False, 8) in seen, seen
    if isz == 2:
        assert {c for k, _, c in (t for t in seen if t[0] == "cl fill4")} >= {2, 8}, seen
        assert {nr for k, nr, _ in (t for t in seen if t[0] == "cl fill4")} == {16, 32}, seen


def _skewed_cols_input(rng, shape, dtype, off, step):
    """(xh, xb, x): _cols_special_input's values with NaN in every row's
    last column (read by the next row's first tile of a skewed plan), +inf
    in one row's second to last, and -inf / 40 at columns step, 2 step + 1,
    ... (tile boundaries and near them); xb an (O, L, I + off) device buffer
    holding them at column offset off, x the view (rows off the grid by
    off elements, row stride I + off)."""
    import cupy as cp

    O, L, I = shape
    xh = _cols_special_input(rng, shape, dtype)
    xh[:, :, I - 1] = np.nan
    xh[0, 3, I - 2] = np.inf
    for c in range(step - 1, I - 2, step):
        xh[0, c % L, c] = -np.inf if c % 2 else 40.0
    xb = cp.empty((O, L, I + off), dtype=np_dtype(dtype))
    xb[:, :, off:] = cp.asarray(xh)
    return xh, xb, xb[:, :, off:]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("log", [False, True])
def test_cols_skew(dtype, log):
    """softmax_cols_cl's SK form (skewed packs on each row's own grid, a
    tile writing two packs fewer a row than it loads): full and half packs
    at every NR whose cluster has at most 8 blocks (clusters of 1-8), on
    arrays whose rows are off the pack grid (odd I, several outer slices,
    tiles cut by the row ends, narrow tiles) and on views whose base is off
    it too (x and y alike); special columns at the row ends and across tile
    boundaries (the first tile of a row loads the previous row's last
    elements: NaN there must not leak), output poisoned first; then the
    public call (the dispatcher's skewed plan on a large array, and the
    narrow plans where y is not skewed as x; float32 is not dispatched to
    it)."""
    import cupy as cp
    from cusoftmax._launch import Launch

    dev = real_device_info()
    if dev.cc < 90:
        pytest.skip("the skewed-pack plans are sm_90's (softmax_cols_cl needs clusters)")
    isz = np.dtype(np_dtype(dtype)).itemsize
    rng = np.random.default_rng(19)
    seen = set()
    cases = [((1, 1000, 1001), 0), ((2, 333, 301), 0), ((3, 130, 37), 0), ((1, 129, 9), 1), ((1, 2000, 3001), 0),
             ((2, 300, 999), 1), ((1, 700, 1500 if isz == 2 else 1502), 1)]
    for (O, L, I), off in cases:
        xh, xb, x = _skewed_cols_input(rng, (O, L, I), dtype, off, 13)
        S = L * (I + off)
        ran = 0
        for v in (16 // isz, 8 // isz):
            for nr in (4, 8, 16):
                p = _dispatch._plan_cols_cl(O, L, I, dtype, dtype, log, dev, 1, nr=nr, v=v, sk=True)
                if p is None:
                    continue
                assert p.kernel.endswith(", true>"), p
                seen.add((v * isz, p.extra[1]))
                yb = cp.full((O, L, I + off), np.nan, dtype=np_dtype(dtype))
                Launch(p, x.data.device_id).cols(x.data.ptr, yb.data.ptr + off * isz, O, L, I, S, I + off, S,
                                                 I + off)
                assert bool(cp.isnan(yb[:, :, :off]).all()), p  # nothing written outside the view
                check_forward(yb[:, :, off:], xh, axis=1, log=log, ctx=f"{p.kernel} grid {p.grid} {(O, L, I)} +{off}")
                ran += 1
        assert ran, (O, L, I)
        fn = cusoftmax.log_softmax if log else cusoftmax.softmax
        yb = cp.full((O, L, I + off), np.nan, dtype=np_dtype(dtype))
        y = fn(x, axis=1, out=yb[:, :, off:])  # skewed alike
        check_forward(y, xh, axis=1, log=log, ctx=f"api out= {(O, L, I)} +{off}")
        y = fn(x, axis=1)  # a fresh y: skewed alike only if x's view is on the grid's offset 0
        check_forward(y, xh, axis=1, log=log, ctx=f"api {(O, L, I)} +{off}")
        del x, xb, yb, y
    assert {c for _, c in seen} == {1, 2, 4, 8}, seen
    assert {b for b, _ in seen} == {8, 16}, seen
    # the dispatcher's skewed plan (16-bit): a large array whose rows are off the grid
    O, L, I = 1, 1000, 5001
    auto = _dispatch.plan_cols(O, L, I, dtype, dtype, log, dev, 1, True, True)
    if isz == 2:
        assert I * isz >= _dispatch.COLS_SKEW_MIN_ROW_BYTES[isz] and O * L * I * isz >= _dispatch.COLS_SKEW_MIN_BYTES
        assert auto.kernel.startswith("softmax_cols_cl") and auto.kernel.endswith(", true>"), auto
    else:  # float32 takes no skewed cluster plan (here: the skewed sync plan, test_cols_sync_skew)
        assert not auto.kernel.endswith(", 1, true>"), auto
    assert not _dispatch.plan_cols(O, L, I, dtype, dtype, log, dev, 1, True, False).kernel.endswith(", true>")
    xh = _cols_special_input(rng, (O, L, I), dtype)
    xh[:, :, I - 1] = np.nan
    x = cp.asarray(xh)
    fn = cusoftmax.log_softmax if log else cusoftmax.softmax
    check_forward(fn(x, axis=1), xh, axis=1, log=log, ctx=f"api {(O, L, I)} {auto.kernel}")
    # y not skewed as x (out= a view one element off): the narrow plans
    yb = cp.full((O, L, I + 1), np.nan, dtype=np_dtype(dtype))
    y = fn(x, axis=1, out=yb[:, :, 1:])
    check_forward(y, xh, axis=1, log=log, ctx=f"api out= off the grid {(O, L, I)}")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("log", [False, True])
def test_cols_sync_skew(dtype, log):
    """softmax_cols_sync's SK form (16-byte packs on each row's own grid, a
    tile writing two packs fewer a row than it loads, in rounds): launched
    directly at NR 4 and 16, tiles of 128 and 256 bytes, on arrays whose rows
    are off the pack grid (odd I, I = 2 mod 4, several outer slices whose
    slabs start at different offsets, tiles cut by the row ends, axes not a
    multiple of a block's rows, one round and many) and on views whose base
    is off it too (x and y alike); special columns at the row ends (the
    first tile of a row loads the previous row's last elements: NaN there
    must not leak) and across tile boundaries, output poisoned first,
    nothing written outside the view. Then the public call on arrays the
    dispatcher sends to it (log_softmax of COLS_SYNC_SK_NO_LOG's dtypes is not sent to it) and, with
    y not skewed as x, on the plans without it."""
    import cupy as cp
    from cusoftmax._launch import Launch

    dev = real_device_info()
    isz = np.dtype(np_dtype(dtype)).itemsize
    v = 16 // isz
    rng = np.random.default_rng(29)
    seen = set()
    cases = [((1, 1000, 1001), 0), ((3, 300, 333), 1), ((2, 517, 130), 0), ((1, 64, 77), 3), ((1, 2100, 3001), 0),
             ((2, 700, 1002), 2), ((1, 4096, 255), 0)]
    for (O, L, I), off in cases:
        off %= v
        xh, xb, x = _skewed_cols_input(rng, (O, L, I), dtype, off, 23)
        S = L * (I + off)
        ran = 0
        for nr, minb in ((4, 3), (16, 2)):
            for seg in (128, 256):
                p = _dispatch._plan_cols_sync(O, L, I, dtype, dtype, log, dev, 1, nr=nr, segment=seg, sk=True,
                                              minb=minb)
                if p is None:
                    continue
                assert p.kernel.endswith(", false, true>") and p.sync, p
                tx, splits, tiles, _ = p.extra
                assert tiles == O * -(-(I + v - 1) // ((tx - 2) * v)), p
                seen.add((nr, -(-tiles * splits // p.grid[0]) > 1, splits > 1))
                yb = cp.full((O, L, I + off), np.nan, dtype=np_dtype(dtype))
                Launch(p, x.data.device_id).cols(x.data.ptr, yb.data.ptr + off * isz, O, L, I, S, I + off, S,
                                                 I + off)
                assert bool(cp.isnan(yb[:, :, :off]).all()), p  # nothing written outside the view
                check_forward(yb[:, :, off:], xh, axis=1, log=log,
                              ctx=f"{p.kernel} grid {p.grid} extra {p.extra} {(O, L, I)} +{off}")
                ran += 1
        assert ran, (O, L, I)
        del x, xb, yb
    assert {nr for nr, _, _ in seen} == {4, 16}, seen
    assert {r for _, r, _ in seen} == {False, True}, seen  # one round and several
    assert {m for _, _, m in seen} == {False, True}, seen  # one split and several
    if dev.cc < 90:
        return  # (the dispatcher takes it on sm_90 only)
    fn = cusoftmax.log_softmax if log else cusoftmax.softmax
    O, L, I = (1, 8000, 1001) if dtype == "float32" else (1, 2000, 3001)
    auto = _dispatch.plan_cols(O, L, I, dtype, dtype, log, dev, 1, True, True)
    want = dtype in _dispatch.COLS_SYNC_SK_DTYPES and not (log and dtype in _dispatch.COLS_SYNC_SK_NO_LOG)
    assert auto.kernel.endswith(", false, true>") == want, auto
    xh = _cols_special_input(rng, (O, L, I), dtype)
    xh[:, :, I - 1] = np.nan
    x = cp.asarray(xh)
    y = cp.full((O, L, I), np.nan, dtype=np_dtype(dtype))
    check_forward(fn(x, axis=1, out=y), xh, axis=1, log=log, ctx=f"api {(O, L, I)} {auto.kernel}")
    # y not skewed as x (out= a view one element off): not the skewed plan
    assert not _dispatch.plan_cols(O, L, I, dtype, dtype, log, dev, 1, False, False).kernel.endswith(", false, true>")
    yb = cp.full((O, L, I + 1), np.nan, dtype=np_dtype(dtype))
    check_forward(fn(x, axis=1, out=yb[:, :, 1:]), xh, axis=1, log=log, ctx=f"api out= off the grid {(O, L, I)}")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,out_dtype", [("float32", None), ("bfloat16", None), ("float16", None),
                                             ("float32", "bfloat16")])
@pytest.mark.parametrize("log", [False, True])
def test_cols_fold(dtype, out_dtype, log):
    """softmax_cols_sync's FOLD form (_plan_cols_fold): dense slabs whose
    unit-stride length I is not a multiple of the 16-byte pack, read as
    (L / f, I x f). The dispatcher's fold plan and every NR forced, over one
    round and one slab a round (O = 2, 3: several rounds), a partial last
    tile, special columns, output poisoned first; then the public call on
    the dense array (the dispatcher's choice) and on a non-dense view of
    the same values (a column slice: no fold)."""
    import cupy as cp
    from cusoftmax._launch import Launch

    dev = real_device_info()
    odt = out_dtype or dtype
    isz, osz = np.dtype(np_dtype(dtype)).itemsize, np.dtype(np_dtype(odt)).itemsize
    v = 16 // max(isz, osz)
    rng = np.random.default_rng(17)
    cases = [(1, 1000, 1001), (2, 400, 1001), (1, 16384, 255), (3, 512, 37), (1, 800, 1502),
             (1, 40000, 9), (2, 4000, 1001)]
    forced = 0
    for O, L, I in cases:
        vec = v
        while vec > 1 and I % vec:
            vec //= 2
        f = _dispatch.fold_factor(I, dtype, odt)
        assert f > 1 and L % f == 0, (O, L, I, f)
        xh = _cols_special_input(rng, (O, L, I), dtype)
        x = cp.asarray(xh)
        plans = []
        for nr in (None,) + _dispatch.COLS_FOLD_NR:
            p = _dispatch._plan_cols_fold(O, L, I, dtype, odt, log, dev, vec, nr=nr)
            if p is None:
                continue
            assert p.fold == f and p.kernel.endswith("true, true>"), p
            assert p.fallback is not None and p.fallback.fold == 1, p
            plans.append(p)
            splits, tiles = p.extra[1], p.extra[2]
            if O > 1:  # one slab a round
                plans.append(dataclasses.replace(p, grid=(tiles // O * splits,)))
        assert plans, (O, L, I)
        L2, I2 = L // f, I * f
        for p in plans:
            y = cp.full((O, L, I), np.nan, dtype=np_dtype(odt))
            Launch(p, x.data.device_id).cols(x.data.ptr, y.data.ptr, O, L2, I2, L * I, I2, L * I, I2)
            check_forward(y, xh, axis=1, log=log, out_dtype=odt, ctx=f"{p.kernel} grid {p.grid} {(O, L, I)}")
            forced += 1
        fn = cusoftmax.log_softmax if log else cusoftmax.softmax
        auto = _dispatch.plan_cols(O, L, I, dtype, odt, log, dev, vec, True)
        y = fn(x, axis=1, dtype=out_dtype)
        check_forward(y, xh, axis=1, log=log, out_dtype=odt, ctx=f"api {(O, L, I)} {auto.kernel}")
        # a column slice of a wider array: rows of I + 1, not dense (no fold)
        xw = cp.empty((O, L, I + 1), dtype=x.dtype)
        xw[:, :, :I] = x
        y = fn(xw[:, :, :I], axis=1, dtype=out_dtype)
        check_forward(y, xh, axis=1, log=log, out_dtype=odt, ctx=f"api sliced {(O, L, I)}")
        del x, xw, y
    assert forced >= 2 * len(cases), forced
    # the dispatcher takes the fold plan on dense slabs (the threshold permitting)
    big = (1, 4000, 1001)
    nbytes = big[0] * big[1] * big[2] * isz
    auto = _dispatch.plan_cols(*big, dtype, odt, log, dev, 1, True)
    assert (auto.fold > 1) == (nbytes >= _dispatch.COLS_FOLD_MIN_BYTES), auto


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("log", [False, True])
def test_cols_fold_over_rounds(dtype, log):
    """The folded sync kernel where a narrow-pack or skewed sync plan would
    take two rounds (_fold_over_rounds): arrays under COLS_FOLD_MIN_BYTES and
    unit-stride lengths of 4- and 8-byte packs, special columns, through the
    public call on the dense array (the dispatcher's plan, checked to be
    the fold on sm_90 with at least 132 SMs; bfloat16's 8-byte packs take
    COLS_NARROW_SYNC8's plan instead) and on a column slice of a wider
    array (not dense: the old plan), both against the float64 reference."""
    import cupy as cp
    from cusoftmax import _api

    dev = real_device_info()
    isz = np.dtype(np_dtype(dtype)).itemsize
    shapes = [(1, 4000, 718), (1, 1000, 4002)] if isz == 4 else [(1, 3000, 1001), (1, 2600, 1002), (1, 5000, 700)]
    fn = cusoftmax.log_softmax if log else cusoftmax.softmax
    rng = np.random.default_rng(29)
    folded = 0
    for O, L, I in shapes:
        xh = _cols_special_input(rng, (O, L, I), dtype)
        x = cp.asarray(xh)
        p = _api._prepare(x, 1, None, "auto", log, None).launch.plan  # the call's plan
        folded += p.fold > 1
        y = fn(x, axis=1)
        check_forward(y, xh, axis=1, log=log, out_dtype=dtype, ctx=f"api {(O, L, I)} {p.kernel} fold {p.fold}")
        xw = cp.empty((O, L, I + 1), dtype=x.dtype)
        xw[:, :, :I] = x
        y = fn(xw[:, :, :I], axis=1)
        check_forward(y, xh, axis=1, log=log, out_dtype=dtype, ctx=f"api sliced {(O, L, I)}")
        del x, xw, y
    if dev.cc >= 90 and dev.sm_count >= 132:  # (bfloat16 (5000, 700): 8-byte packs at NR 16, COLS_NARROW_SYNC8)
        assert folded == len(shapes) - (dtype in _dispatch.COLS_NARROW_SYNC8_DTYPES), folded


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.usefixtures("no_cl16")
def test_cols_cl_small(dtype, log):
    """Small arrays whose plan has few blocks (_cols_cl_small,
    _cols_sync_small): the cluster kernel on narrow tiles in clusters of 8
    (16-byte packs; 16-bit 8-byte packs too), or the sync kernel at NR 4 on
    64-byte tiles, through the public call against the float64 reference
    (one slab and several; special columns), each plan checked to be that
    form, or the 4-byte-pack tiles that follow it (_cols_fill4), on sm_90
    with at least 132 SMs."""
    import cupy as cp
    from cusoftmax import _api

    dev = real_device_info()

    def cl8(p):  # a cluster of 8 blocks on tiles of at most 64 bytes, or _cols_fill4's 4-byte-pack tiles
        v = int(p.kernel.split(", ")[3])
        fill4 = (v * isz == 4 and p.extra[0] * 4 == _dispatch.COLS_FILL4_SEGMENT
                 and p.extra[3] == _dispatch.COLS_FILL4_NR)
        return p.kernel.startswith("softmax_cols_cl<") and (fill4 or p.extra[1] == 8 and p.extra[0] * v * isz <= 64)

    def sync4(p):
        return p.kernel.startswith("softmax_cols_sync<") and p.extra[3] == 4 and p.extra[0] * 16 == 64

    isz = np.dtype(np_dtype(dtype)).itemsize
    if dtype == "float32":  # (its bound: SMs / 4 blocks)
        cases = [((1, 4000, 64), cl8), ((1, 8000, 64), cl8), ((1, 6000, 32), cl8), ((1, 3000, 32), cl8),
                 ((1, 12000, 16), sync4)]
    else:
        cases = [((1, 4000, 64), cl8), ((1, 8000, 64), cl8), ((1, 2000, 200), cl8), ((4, 2000, 64), cl8),
                 ((1, 6000, 32), cl8), ((1, 4000, 100), cl8), ((1, 16000, 64), sync4), ((1, 12000, 48), sync4)]
    fn = cusoftmax.log_softmax if log else cusoftmax.softmax
    rng = np.random.default_rng(31)
    formed = 0
    for (O, L, I), form in cases:
        xh = _cols_special_input(rng, (O, L, I), dtype)
        x = cp.asarray(xh)
        p = _api._prepare(x, 1, None, "auto", log, None).launch.plan
        formed += form(p)
        y = fn(x, axis=1)
        check_forward(y, xh, axis=1, log=log, out_dtype=dtype, ctx=f"api {(O, L, I)} {p.kernel} {p.grid} {p.extra}")
        del x, y
    if dev.cc >= 90 and dev.sm_count >= 132:
        assert formed == len(cases), formed


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,out_dtype", [("float32", None), ("bfloat16", None), ("float16", None),
                                             ("float32", "bfloat16"), ("float64", None)])
@pytest.mark.parametrize("log", [False, True])
def test_cols_split_fold(dtype, out_dtype, log):
    """The split stream's FOLD form (_plan_cols_split_fold): dense slabs
    whose unit-stride length I is not a multiple of the pack, streamed as
    (L / f, I x f), the finish kernel merging each original column's f
    reshaped totals. Launched directly at every fold factor (I odd, and I
    a multiple of 2 or 4 elements but not of the pack), several slabs,
    one split and many, tiles cut by the reshaped row's end, special
    columns, output poisoned first; then, on sm_90, the public call on
    arrays the dispatcher sends to it (same dtype, too long for the cluster
    and folded sync plans) and on a non-dense view of the same values."""
    import cupy as cp
    from cusoftmax._launch import Launch

    dev = real_device_info()
    odt = out_dtype or dtype
    v = _dispatch._pack_elems(dtype, odt)
    rng = np.random.default_rng(23)
    cases = [(1, 1000, 1001), (3, 64, 37), (2, 4000, 1001), (1, 400, 255), (2, 96, 2 * 37), (1, 4004, 1002)]
    if v == 8:
        cases.append((1, 800, 4 * 37))
    seen = set()
    fn = cusoftmax.log_softmax if log else cusoftmax.softmax
    for O, L, I in cases:
        f = _dispatch.fold_factor(I, dtype, odt)
        if f == 1 or L % f:
            continue
        xh = _cols_special_input(rng, (O, L, I), dtype)
        xh[:, :, I - 1] = np.nan  # the reshaped row's end
        xh[O - 1, L - 1, I - 2] = 50.0
        x = cp.asarray(xh)
        p = _dispatch._plan_cols_split_fold(O, L, I, dtype, odt, log, dev)
        assert p is not None and p.fold == f and p.pre_kernel and p.kernel.endswith(", true>"), p
        plans = [p]
        for bps in (1, 32):  # few splits (1 where the tiles fill the GPU) and many
            q = _dispatch._plan_cols_split(O, L // f, I * f, dtype, odt, log, dev, v, blocks_per_sm=bps, fold=f)
            plans.append(q)
        L2, I2 = L // f, I * f
        for q in plans:
            seen.add((f, q.grid[1] > 1))
            y = cp.full((O, L, I), np.nan, dtype=np_dtype(odt))
            Launch(q, x.data.device_id).cols(x.data.ptr, y.data.ptr, O, L2, I2, L * I, I2, L * I, I2)
            check_forward(y, xh, axis=1, log=log, out_dtype=odt, ctx=f"{q.kernel} grid {q.grid} {(O, L, I)}")
        del x, y
    assert {f for f, _ in seen} >= ({2, 4, 8} if v == 8 else {2, 4} if v == 4 else {2}), seen
    assert {m for _, m in seen} == {False, True}, seen
    if dev.cc < 90 or out_dtype is not None or dtype == "float64":
        return  # (the dispatcher takes it for same-dtype narrow-pack arrays on sm_90 only)
    # (float32 (8000, 1001) and shorter axes take the skewed sync plan: test_cols_sync_skew)
    O, L, I = (1, 16400, 1001) if dtype == "float32" else (1, 16384, 1001)
    auto = _dispatch.plan_cols(O, L, I, dtype, dtype, log, dev, 1, True, True)
    assert auto.pre_kernel and auto.fold == _dispatch.fold_factor(I, dtype, dtype), auto
    assert _dispatch.plan_cols(O, L, I, dtype, dtype, log, dev, 1, False, False).fold == 1
    xh = _cols_special_input(rng, (O, L, I), dtype)
    x = cp.asarray(xh)
    y = cp.full((O, L, I), np.nan, dtype=np_dtype(dtype))
    check_forward(fn(x, axis=1, out=y), xh, axis=1, log=log, ctx=f"api {(O, L, I)} {auto.kernel}")
    xw = cp.empty((O, L, I + 1), dtype=x.dtype)  # rows of I + 1: not dense, no fold
    xw[:, :, :I] = x
    check_forward(fn(xw[:, :, :I], axis=1), xh, axis=1, log=log, ctx=f"api sliced {(O, L, I)}")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("log", [False, True])
def test_cols_wide(dtype, log, monkeypatch):
    """The whole-width split stream (softmax_cols_wide_*, _plan_cols_wide):
    launched directly, its size bounds lifted, on small slabs at every fold
    factor (I a multiple of 4 but not of the pack, of 2, odd; a folded row of
    1024 packs), axes shorter than a batch of rows and not a multiple of the
    blocks, special columns (NaN,
    +inf, all -inf, one -inf; NaN in the reshaped row's last column), output
    poisoned first; then, on sm_90, the public call on an array the
    dispatcher sends to it, and a non-dense view of it (another plan)."""
    import cupy as cp
    from cusoftmax import _api
    from cusoftmax._launch import Launch

    dev = real_device_info()
    if dev.cc < 90:
        pytest.skip("the whole-width stream is sm_90 only (the dispatcher never takes it before)")
    rng = np.random.default_rng(31)
    fn = cusoftmax.log_softmax if log else cusoftmax.softmax
    with monkeypatch.context() as mp:
        mp.setattr(_dispatch, "COLS_WIDE_MIN_BYTES", 0)
        mp.setattr(_dispatch, "COLS_WIDE_MIN_ROW_BYTES", 0)
        mp.setattr(_dispatch, "COLS_WIDE_MIN_ROWS", 0)
        mp.setattr(_dispatch, "COLS_WIDE_LONG_ROW_MIN_L", 0)
        seen = set()
        for O, L, I in ((1, 2000, 36), (1, 600, 514), (1, 4000, 37), (1, 48, 1001), (1, 9, 1500), (1, 1001, 2500),
                        (1, 5550, 36), (1, 16000, 37), (1, 200, 4092)):
            f = _dispatch.fold_factor(I, dtype, dtype)
            if L % f:
                L += f - L % f
            p = _dispatch._plan_cols_wide(O, L, I, dtype, dtype, log, dev, True)
            assert p is not None and p.fold == f and p.mid_kernel, (O, L, I, p)
            xh = _cols_special_input(rng, (O, L, I), dtype)
            xh[:, :, I - 1] = np.nan
            x = cp.asarray(xh)
            y = cp.full((O, L, I), np.nan, dtype=np_dtype(dtype))
            Launch(p, x.data.device_id).cols(x.data.ptr, y.data.ptr, O, L // f, I * f, L * I, I * f, L * I, I * f)
            check_forward(y, xh, axis=1, log=log, ctx=f"{p.kernel} grid {p.grid} extra {p.extra} {(O, L, I)}")
            seen.add(f)
            del x, y
        assert seen == {2, 4, 8}, seen
        assert _dispatch._plan_cols_wide(1, 1000, 1024, dtype, dtype, log, dev, True) is None  # on the 16-byte grid
        assert _dispatch._plan_cols_wide(1, 1000, 1000, dtype, dtype, log, dev, False) is None  # not dense
        assert _dispatch._plan_cols_wide(2, 1000, 1000, dtype, dtype, log, dev, True) is None  # O > 1
        assert _dispatch._plan_cols_wide(1, 1000, 1000, dtype, "float32", log, dev, True) is None
    O, L, I = 1, 16000, 1500
    auto = _dispatch.plan_cols(O, L, I, dtype, dtype, log, dev, 4, True, False)
    assert auto.mid_kernel and auto.fold == 2, auto
    xh = _cols_special_input(rng, (O, L, I), dtype)
    x = cp.asarray(xh)
    assert _api._prepare(x, 1, None, "auto", log, None).launch.plan.mid_kernel
    y = cp.full((O, L, I), np.nan, dtype=np_dtype(dtype))
    check_forward(fn(x, axis=1, out=y), xh, axis=1, log=log, ctx=f"api {(O, L, I)} {auto.kernel}")
    xw = cp.empty((O, L, I + 8), dtype=x.dtype)  # rows of I + 8: not dense
    xw[:, :, :I] = x
    v = xw[:, :, :I]
    assert not _api._prepare(v, 1, None, "auto", log, None).launch.plan.mid_kernel
    check_forward(fn(v, axis=1), xh, axis=1, log=log, ctx=f"api sliced {(O, L, I)}")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("log", [False, True])
def test_cols_slab(dtype, log, monkeypatch):
    """The whole-slab kernel (softmax_cols_slab, _plan_cols_slab): launched
    directly, whatever the rule, on slabs whose period is one row of columns
    or many (a tree of odd and even depth), I longer than the block, a
    column of one element a row (I = 1), fewer packs than blocks, the last
    block short; special columns (NaN, +inf, all -inf, one -inf); output
    poisoned; two launches in a row (the barrier counters are left zero).
    Then the public call where the dispatcher takes it (asserted), in place,
    and through its fallback when the cooperative launch is refused."""
    import cupy as cp
    from cusoftmax import _api, _launch
    from cusoftmax._launch import Launch

    dev = real_device_info()
    if dev.cc < 90:
        pytest.skip("the whole-slab kernel is taken on sm_90 only (the dispatcher never takes it before)")
    rng = np.random.default_rng(41)
    fn = cusoftmax.log_softmax if log else cusoftmax.softmax
    isz = np.dtype(np_dtype(dtype)).itemsize
    pack = 16 // isz
    widest = 4096 if isz == 2 else 2048  # lcm(I, pack) up to the 4096-element period
    odd = 1200 if isz == 2 else 600  # a period of 3 rows of columns: an odd tree
    rows_a_period = set()
    for L, I in ((2000, 36), (600, 514), (9, 1000), (3000, 1), (200, widest), (4002, 300), (1001, 1500),
                 (16, 8), (40000, 6), (3000, odd)):
        while (L * I) % pack:
            L += 1
        p = _dispatch._plan_cols_slab(L, I, dtype, log, dev)
        assert p is not None and p.sync and p.grid == (dev.sm_count,), (L, I, p)
        ppb, ps = p.extra
        S = ps * pack
        assert S % I == 0 and S % pack == 0 and S <= _dispatch.COLS_SLAB_SLOTS and ps <= p.block[0], (L, I, p)
        rows_a_period.add(S // I)
        if I >= 5:
            xh = _cols_special_input(rng, (1, L, I), dtype)
        else:
            xh = (rng.standard_normal((1, L, I)) * 3).astype(np_dtype(dtype))
        x = cp.asarray(xh)
        launch = Launch(p, x.data.device_id)
        for rep in range(2):
            y = cp.full((1, L, I), np.nan, dtype=np_dtype(dtype))
            launch.cols(x.data.ptr, y.data.ptr, 1, L, I, L * I, I, L * I, I)
            check_forward(y, xh, axis=1, log=log, ctx=f"{p.kernel} extra {p.extra} {(L, I)} rep {rep}")
        assert np.array_equal(host(x).view(np.uint8), xh.view(np.uint8)), (L, I)
        del x, y
    assert 1 in rows_a_period and any(n > 1 and n % 2 for n in rows_a_period), rows_a_period
    stream = cp.cuda.get_current_stream().ptr
    cnt = _launch._sync_ws[("colslab", cp.cuda.Device().id, stream)]
    assert not host(cnt[:12]).any(), "barrier counters not left zero"
    # the dispatcher's rule: a slab it takes, the public call, in place, the fallback
    L, I = 16000, 300
    vec = pack
    while I % vec:
        vec //= 2
    auto = _dispatch.plan_cols(1, L, I, dtype, dtype, log, dev, vec, True, True)
    assert auto.kernel.startswith("softmax_cols_slab") and auto.fallback is not None, auto
    xh = _cols_special_input(rng, (1, L, I), dtype)[0]
    x = cp.asarray(xh)
    prep = _api._prepare(x, 0, None, "auto", log, None)
    assert prep.launch.plan.kernel.startswith("softmax_cols_slab"), prep.launch.plan
    y = cp.full((L, I), np.nan, dtype=np_dtype(dtype))
    check_forward(fn(x, axis=0, out=y), xh, axis=0, log=log, ctx=f"api {(L, I)}")
    x2 = x.copy()
    assert fn(x2, axis=0, out=x2) is x2
    check_forward(x2, xh, axis=0, log=log, ctx=f"api in place {(L, I)}")
    with monkeypatch.context() as mp:  # every cooperative launch refused: the fallback chain runs
        mp.setattr(_launch, "_coop_launch", lambda *a: _launch._COOP_TOO_LARGE)
        y = cp.full((L, I), np.nan, dtype=np_dtype(dtype))
        check_forward(fn(x, axis=0, out=y), xh, axis=0, log=log, ctx=f"api {(L, I)} fallback")
    xw = cp.empty((L, I + 8), dtype=x.dtype)  # rows of I + 8: not dense, another plan
    xw[:, :I] = x
    v = xw[:, :I]
    assert not _api._prepare(v, 0, None, "auto", log, None).launch.plan.kernel.startswith("softmax_cols_slab")
    check_forward(fn(v, axis=0), xh, axis=0, log=log, ctx=f"api sliced {(L, I)}")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.usefixtures("no_cl16")
def test_cols_cl_fill(dtype, log, monkeypatch):
    """The filled-grid cluster plans (_cols_cl_fill): on sm_90, the public
    call on arrays the rule sends to a cluster plan in place of a sync plan
    (uneven grids of 304 / 188 / 72 blocks) or of a cluster plan of 80
    blocks, with special columns, output poisoned first, asserting the plan
    the call took."""
    import cupy as cp
    from cusoftmax import _api

    dev = real_device_info()
    if dev.cc < 90:
        pytest.skip("cluster plans are sm_90 only")
    rng = np.random.default_rng(37)
    fn = cusoftmax.log_softmax if log else cusoftmax.softmax
    for O, L, I in ((1, 2000, 1200), (1, 2000, 3000), (1, 6000, 384), (1, 3000, 640)):
        xh = _cols_special_input(rng, (O, L, I), dtype)
        x = cp.asarray(xh)
        plan = _api._prepare(x, 1, None, "auto", log, None).launch.plan
        lo, hi = (f * dev.sm_count for f in _dispatch.COLS_CL_FILL_BLOCKS)
        assert plan == _dispatch.plan_cols(O, L, I, dtype, dtype, log, dev, 8, True, False), (O, L, I, plan)
        if dev.sm_count == 132:  # (H100 SXM / H200: the rule's measured device; elsewhere the grids differ)
            assert plan.kernel.startswith("softmax_cols_cl<") and lo <= _dispatch._blocks(plan) <= hi, (O, L, I, plan)
            monkeypatch.setattr(_dispatch, "COLS_CL_FILL", False)
            assert _dispatch.plan_cols(O, L, I, dtype, dtype, log, dev, 8, True, False) != plan
            monkeypatch.setattr(_dispatch, "COLS_CL_FILL", True)
        y = cp.full((O, L, I), np.nan, dtype=np_dtype(dtype))
        check_forward(fn(x, axis=1, out=y), xh, axis=1, log=log, ctx=f"api {(O, L, I)} {plan.kernel} grid {plan.grid}")
        del x, y


@pytest.mark.parametrize("dev", DEVS, ids=["H100", "A100"])
def test_smem1_rows_plan(dev):
    """Many rows of 16-64 KiB (32-bit rows: 32-64 KiB) take softmax_smem one
    row a block (one stage, launch bounds for the blocks shared memory fits,
    grid capped like every grid-stride grid); shorter or longer rows, fewer
    than FWD_SMEM1_MIN_ROWS_PER_SM x SMs rows and 64-bit rows do not."""
    many = _dispatch.FWD_SMEM1_MIN_ROWS_PER_SM * dev.sm_count
    for dt, isz in (("bfloat16", 2), ("float16", 2), ("float32", 4)):
        lo, hi = _dispatch.FWD_SMEM1_ROW_BYTES[isz]
        for nbytes in (lo, 2 * lo if 2 * lo <= hi else lo, hi):
            L = nbytes // isz
            for R in (many, 10 ** 5):
                p = _dispatch.plan_rows(R, L, dt, dt, True, dev)
                th, minb = _dispatch.smem1_shape(nbytes, dev)
                assert p.regime == "smem" and p.kernel.endswith(f", {th}, 1, 1, {minb}>"), (dt, R, L, p)
                assert p.block == (th,) and p.grid == (min(R, dev.sm_count * _dispatch.MAX_BLOCKS_PER_SM),)
                assert p.smem == nbytes and th * minb <= 2048
            assert not _dispatch.plan_rows(many - 1, L, dt, dt, False, dev).kernel.endswith(", 1, 1, 2>")
        for L in (lo // isz - 16 // isz, hi // isz + 1):  # one pack less / one element more
            p = _dispatch.plan_rows(many, L, dt, dt, False, dev)
            assert ", 1, 1, " not in p.kernel, (dt, L, p.kernel)
    p = _dispatch.plan_rows(many, 4096, "float64", "float64", False, dev)  # 32 KiB of float64: not measured
    assert ", 1, 1, " not in p.kernel, p.kernel
    assert _dispatch.smem1_shape(16 * 1024, dev) == (256, 8)
    assert _dispatch.smem1_shape(32 * 1024, dev) == (512, 4)
    assert _dispatch.smem1_shape(64 * 1024, dev) == (512, 2)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("log", [False, True])
def test_smem1_rows(dtype, log):
    """The one-row-a-block staged forward on the real GPU: the shortest,
    an odd and the longest row of its range, aligned and misaligned rows
    (x[:, 1:] of a base whose width is a multiple of the vector, written to
    the same view of a poisoned output: rows share their misalignment, so
    the vector kernel runs), special values, more rows than the 2-SM
    stand-in's grid (blocks loop over rows)."""
    with fake_device(2, 90) as dev:
        isz = np_dtype(dtype).itemsize
        lo, hi = _dispatch.FWD_SMEM1_ROW_BYTES[isz]
        R = 2 * dev.sm_count * _dispatch.MAX_BLOCKS_PER_SM + 3
        pack = 16 // isz
        for W, ops in ((lo // isz, []), (lo // isz + 2 * pack, [("slice", 1, 1, None, 1)]), (hi // isz, [])):
            rng = np.random.default_rng(W)
            base = build_base(rng, (R, W), ops, dtype)
            base[1, 3] = -np.inf
            base[2, :] = -np.inf
            base[4, W // 2] = np.nan
            _, regime = run_case(base, ops, -1, log, None, "view" if ops else "fresh")
            L = W - (1 if ops else 0)
            assert regime == "smem", (L, regime)
            import cupy
            from cusoftmax import _api
            out = apply_view(cupy.empty(base.shape, base.dtype), ops) if ops else None  # as run_case's
            k = _api._prepare(apply_view(cupy.asarray(base), ops), -1, None, "auto", log, out).launch.plan.kernel
            assert ", 1, 1, " in k, k  # one stage, no cluster


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.usefixtures("no_cl16")
def test_cols_fill4_and_off_sector_tiles(dtype, log, monkeypatch):
    """The plans of _cols_fill4 (4-byte packs on 8-lane tiles, NR 16: small
    16-bit arrays of 8-byte packs, small float32 arrays of 16-byte packs;
    NR 32 for sync plans on longer axes), the narrow plans 16-bit axes of
    8-byte packs take in place of skewed ones
    (COLS_SKEW_ONLY_WIDER), and float32's 256-byte sync tiles on rows off
    the 32-byte sector grid (COLS_SYNC_SEGMENT_OFF_SECTOR_MAX_SPLITS);
    float32's NR 8 cluster plans in place of NR 4 sync plans
    (COLS_SYNC4_CL_DTYPES), bfloat16's 8-byte-pack sync plans in place of
    folded or scalar ones (COLS_NARROW_SYNC8_DTYPES) and the skewed sync
    kernel in place of the whole-width stream on 7000-byte rows
    (COLS_WIDE_LONG_ROW_MIN_L): the public call with special columns, output
    poisoned first, asserting on 132-SM sm_90 devices (where they were
    measured) that the rule changed the plan the call took."""
    import cupy as cp
    from cusoftmax import _api

    dev = real_device_info()
    if dev.cc < 90:
        pytest.skip("cluster plans are sm_90 only")
    rng = np.random.default_rng(41)
    fn = cusoftmax.log_softmax if log else cusoftmax.softmax
    isz = np.dtype(np_dtype(dtype)).itemsize
    if isz == 4:  # (fill4 from cluster plans of 40 blocks and of two slabs; off-sector: 42 splits of 256 bytes)
        cases = [((1, 3000, 160), "COLS_FILL4", False), ((2, 2000, 64), "COLS_FILL4", False),
                 ((1, 6000, 96), "COLS_FILL4_LONG_DTYPES", ()),
                 ((1, 8000, 700), "COLS_SYNC_SEGMENT_OFF_SECTOR_MAX_SPLITS", 32),
                 ((1, 4000, 300), "COLS_SYNC4_CL_DTYPES", ())]
    else:  # (fill4 at 152 and 42 blocks; the long form from a folded sync plan; the narrow plan, not the skewed one)
        cases = [((1, 4000, 300), "COLS_FILL4", False), ((1, 2500, 100), "COLS_FILL4", False),
                 ((1, 1500, 3500), "COLS_SKEW_ONLY_WIDER", False), ((1, 6000, 3500), "COLS_WIDE_LONG_ROW_MIN_L", 0)]
        if dtype == "float16":
            cases.append(((1, 8000, 300), "COLS_FILL4_LONG_DTYPES", ("float32",)))
        else:  # (8-byte packs at NR 16: from the long form's plan, and from scalars at an odd length)
            cases += [((1, 8000, 300), "COLS_NARROW_SYNC8_DTYPES", ()), ((1, 4203, 900), "COLS_NARROW_SYNC8_DTYPES", ())]
    for (O, L, I), switch, value in cases:
        xh = _cols_special_input(rng, (O, L, I), dtype)
        x = cp.asarray(xh)
        plan = _api._prepare(x, 1, None, "auto", log, None).launch.plan
        vec = 16 // isz
        while I % vec:
            vec //= 2
        skew = (I * isz) % 16 != 0
        assert plan == _dispatch.plan_cols(O, L, I, dtype, dtype, log, dev, vec, True, skew), (O, L, I, plan)
        if dev.sm_count == 132:
            with monkeypatch.context() as m:
                m.setattr(_dispatch, switch, value)
                assert _dispatch.plan_cols(O, L, I, dtype, dtype, log, dev, vec, True, skew) != plan, (O, L, I)
            if switch.startswith("COLS_FILL4"):
                nr = _dispatch.COLS_FILL4_NR if switch == "COLS_FILL4" else _dispatch.COLS_FILL4_LONG_NR
                assert plan.kernel.startswith("softmax_cols_cl<") and plan.extra[3] == nr, plan
                assert plan.extra[0] * 4 == _dispatch.COLS_FILL4_SEGMENT, plan
        y = cp.full((O, L, I), np.nan, dtype=np_dtype(dtype))
        check_forward(fn(x, axis=1, out=y), xh, axis=1, log=log, ctx=f"api {(O, L, I)} {plan.kernel} grid {plan.grid}")
        del x, y


def _cols_cl16_case(rng, shape, dtype, log, dev):
    """(xh, x, call, vec, plan) for a C-ordered (O, L, I) array reduced over
    axis 1: special-column data on the host and the GPU, the plan the public
    call takes, the widest pack the rows allow and plan_cols' plan."""
    import cupy as cp
    from cusoftmax import _api

    O, L, I = shape
    xh = _cols_special_input(rng, shape, dtype)
    x = cp.asarray(xh)
    call = _api._prepare(x, 1, None, "auto", log, None).launch.plan
    vec = 8
    while I % vec:
        vec //= 2
    plan = _dispatch.plan_cols(O, L, I, dtype, dtype, log, dev, vec, True, (I * 2) % 16 != 0)
    return xh, x, call, vec, plan


def _check_cols_call_and_fallback(fn, x, xh, plan, call, log):
    """The public call on the (O, L, I) array x (reduced over axis 1; host
    copy xh) into a poisoned output, checked against the reference, then
    ``plan``'s fallback launched directly and checked alike (``call``: the
    plan the call took, for the messages)."""
    import cupy as cp
    from cusoftmax._launch import Launch

    O, L, I = x.shape
    y = cp.full((O, L, I), np.nan, dtype=x.dtype)
    check_forward(fn(x, axis=1, out=y), xh, axis=1, log=log, ctx=f"api {(O, L, I)} {call.kernel} grid {call.grid}")
    fb = plan.fallback
    y.fill(np.nan)
    f = fb.fold
    Launch(fb, x.data.device_id).cols(x.data.ptr, y.data.ptr, O, L // f, I * f, L * I, I * f, L * I, I * f)
    check_forward(y, xh, axis=1, log=log, ctx=f"fallback {(O, L, I)} {fb.kernel} grid {fb.grid}")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("log", [False, True])
def test_cols_cl16(dtype, log, monkeypatch):
    """Clusters of 16 blocks (COLS_CL16_*, a non-portable cluster size the
    loader opts each such kernel into): on sm_90, the public call on arrays
    that give each of the rule's 6 kernels (4-byte packs at NR 4-16, 8-byte
    packs at NR 4 and 8, 16-byte packs at NR 8; 32- and 64-byte tiles; rows on
    and off the 32-byte sector grid), blocks with no rows
    of the axis, two slabs, special columns, output poisoned first, asserting
    the plan the call took; the plan's fallback launched directly; then the
    call with the GPU said not to hold a cluster of 16 (it runs the
    fallback). Without the 16-lane rule (test_cols_cl16_lanes), which takes
    some of these axes."""
    import cupy as cp
    from cusoftmax import _api, _launch

    dev = real_device_info()
    if dev.cc < 90:
        pytest.skip("clusters of 16 are sm_90's (and the rule's)")
    monkeypatch.setattr(_dispatch, "COLS_CL16_LANES", False)
    monkeypatch.setattr(_api, "_cache", {})  # (plans made without the rule stay in this test)
    rng = np.random.default_rng(43)
    fn = cusoftmax.log_softmax if log else cusoftmax.softmax
    seen = set()
    for O, L, I in ((1, 2011, 12), (1, 2011, 8), (1, 2085, 12), (1, 2085, 168), (1, 4120, 12), (1, 4120, 168),
                    (1, 8227, 64), (1, 8000, 100), (2, 3000, 64), (1, 16384, 40)):
        xh, x, call, vec, plan = _cols_cl16_case(rng, (O, L, I), dtype, log, dev)
        assert plan.kernel.startswith("softmax_cols_cl<") and plan.extra[1] == 16 and plan.fallback, (O, L, I, plan)
        # (the fallback only where the GPU cannot hold a cluster of 16; the measured ones, 132 SMs, can)
        assert call == plan or (call == plan.fallback and dev.sm_count != 132), (O, L, I, call)
        seen.add(plan.kernel)
        _check_cols_call_and_fallback(fn, x, xh, plan, call, log)
        del x
    assert len(seen) == 6, seen
    # a GPU that cannot hold a cluster of 16: the call runs the fallback
    O, L, I = 1, 8000, 100
    xh = _cols_special_input(rng, (O, L, I), dtype)
    x = cp.asarray(xh)
    monkeypatch.setattr(_launch, "wide_clusters_fit", lambda fn, plan, device_id: False)
    _api._cache.clear()
    try:
        p = _api._prepare(x, 1, None, "auto", log, None)
        assert p.launch.plan == _dispatch.plan_cols(O, L, I, dtype, dtype, log, dev, 4, True, True).fallback
        y = cp.full((O, L, I), np.nan, dtype=np_dtype(dtype))
        check_forward(fn(x, axis=1, out=y), xh, axis=1, log=log, ctx=f"api fallback {(O, L, I)} {p.launch.plan.kernel}")
    finally:
        _api._cache.clear()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("log", [False, True])
def test_cols_cl16_lanes(dtype, log):
    """The 16-lane rule (COLS_CL16_LANES): on sm_90, the public call on
    arrays that give each of its 8 kernels (1-, 2- and 4-element packs at
    NR 4 and 8, 1- and 2-element packs at NR 16), plus rows narrower than
    16 lanes, an odd row length, two slabs and an axis with blocks that hold
    no rows, special columns, output poisoned first, asserting the plan the
    call took; then the plan's fallback launched directly."""
    dev = real_device_info()
    if dev.cc < 90:
        pytest.skip("clusters of 16 are sm_90's (and the rule's)")
    rng = np.random.default_rng(47)
    fn = cusoftmax.log_softmax if log else cusoftmax.softmax
    seen = set()
    for O, L, I in ((1, 1000, 64), (1, 1500, 96), (1, 4000, 100), (1, 1000, 300), (1, 1500, 384), (1, 4000, 500),
                    (1, 1000, 1000), (1, 2000, 1000), (1, 900, 8), (1, 1111, 33), (2, 700, 48), (1, 601, 40)):
        xh, x, call, vec, plan = _cols_cl16_case(rng, (O, L, I), dtype, log, dev)
        c16 = _dispatch._choose_cols_cl16(O, L, I, dtype, dtype, log, dev, vec)
        lanes = _dispatch._choose_cols_cl16_lanes(O, L, I, dtype, dtype, log, dev, vec, c16)
        assert lanes is not None and plan == dataclasses.replace(lanes, fallback=plan.fallback), (O, L, I, plan)
        assert call == plan or (call == plan.fallback and dev.sm_count != 132), (O, L, I, call)
        seen.add(plan.kernel)
        _check_cols_call_and_fallback(fn, x, xh, plan, call, log)
        del x
    assert len(seen) == 8, seen
