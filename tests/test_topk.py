"""cusoftmax.softmax_topk against the float64 reference (cusoftmax.reference).

GPU tests compare values (per-dtype tolerance), indices (exactly: the tie rule
makes them unique) and the logits at the returned indices, over hypothesis-
drawn problems, every dispatch threshold +-1 (rows, columns, k) and the
special values; every algorithm passes the same checks. CPU tests cover the
argument checks, the regime table and the NVRTC compile of every kernel the
dispatcher can pick (no spills, sm_80 and sm_90).
"""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cusoftmax
from cusoftmax import _dispatch, reference
from cusoftmax._dispatch import DeviceInfo
from cusoftmax._topk import _check_k, _check_k_type, _topk_axis

from _util import DTYPES, np_dtype, to_gpu, tolerance

ALGOS = _dispatch.TOPK_ALGORITHMS
H100 = DeviceInfo(sm_count=132, cc=90)
A100 = DeviceInfo(sm_count=108, cc=80)


# ----------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------
def _device():
    from cusoftmax._launch import device_info
    import cupy
    return device_info(cupy.cuda.runtime.getDevice())


def make_data(rng, shape, style):
    """Host float64 logits of a given style."""
    n = math.prod(shape)
    if style == "normal":
        a = rng.standard_normal(n) * 3
    elif style == "ties":  # heavy ties: small integers
        a = rng.integers(-3, 4, n).astype(np.float64)
    elif style == "sorted":  # ascending rows: every element beats the running threshold
        a = np.sort(rng.standard_normal(shape), axis=-1).reshape(-1)
    elif style == "wide":  # probabilities that underflow
        a = rng.standard_normal(n) * 60
    elif style == "specials":
        a = rng.integers(-3, 4, n).astype(np.float64)
        sp = rng.choice(np.array([np.nan, -np.inf, np.inf, -0.0, 0.0]), n)
        m = rng.random(n) < 0.15
        a[m] = sp[m]
    elif style == "neginf":  # -inf heavy, some rows all -inf
        a = rng.integers(-3, 4, n).astype(np.float64)
        a[rng.random(n) < 0.6] = -np.inf
    else:
        raise ValueError(style)
    return a.reshape(shape)


def check(x, k, axis=-1, log=False, dtype=None, algorithm="auto"):
    """Run softmax_topk and compare with the reference; returns the result."""
    res = cusoftmax.softmax_topk(x, k, axis=axis, log=log, dtype=dtype, algorithm=algorithm)
    assert isinstance(res, cusoftmax.TopK)
    v, i = res
    ref = reference.softmax_topk(x, k, axis=axis, log=log)
    in_name = x.dtype.name if x.dtype.name in DTYPES else "float64"  # integers: float64
    out_name = np.dtype(np_dtype(dtype) if isinstance(dtype, str) else dtype).name if dtype is not None \
        else in_name
    assert v.dtype.name == out_name
    assert i.dtype == np.int64
    assert v.shape == ref.values.shape and i.shape == ref.indices.shape
    assert v.flags.c_contiguous and i.flags.c_contiguous
    ih = i.get()
    # indices exactly (ties: lower index first; NaN last)
    np.testing.assert_array_equal(ih, ref.indices)
    # the logits behind the values are the reference's
    xh = reference.to_float64(x)
    ax = 0 if axis is None else axis
    xs = xh.reshape(-1) if axis is None else xh
    if ih.size:
        np.testing.assert_array_equal(np.take_along_axis(xs, ih, axis=ax),
                                      np.take_along_axis(xs, ref.indices, axis=ax))
    # values
    vh = reference.to_float64(v)
    r = ref.values
    np.testing.assert_array_equal(np.isnan(vh), np.isnan(r))
    L = xs.shape[ax] if xs.ndim else 1
    ok = ~np.isnan(r)
    if out_name == "float32":  # a float32 result is limited by its own rounding
        in_name = "float32"
    if log:
        t = tolerance(in_name, out_name, L, log=True)
        np.testing.assert_array_equal(vh[ok] == -np.inf, r[ok] == -np.inf)
        f = ok & np.isfinite(r)
        err = np.abs(vh[f] - r[f])
        assert np.all(err <= t * np.maximum(1.0, np.abs(r[f]))), (err.max(), t)
    else:
        atol, rtol = tolerance(in_name, out_name, L)
        err = np.abs(vh[ok] - r[ok])
        assert np.all(err <= atol + rtol * np.abs(r[ok])), (err.max(), atol, rtol)
    return res


# ----------------------------------------------------------------------------
# CPU: argument checks, regime table, compile check
# ----------------------------------------------------------------------------
def test_check_k():
    assert _check_k(0, 5) == 0 and _check_k(5, 5) == 5 and _check_k(np.int64(3), 5) == 3
    for bad in (-1, 6):
        with pytest.raises(ValueError, match=r"0 <= k <= 5"):
            _check_k(bad, 5)
    for bad in (True, False, np.bool_(True)):
        with pytest.raises(TypeError, match="bool"):
            _check_k(bad, 5)
    for bad in (2.0, "3", None, [1]):
        with pytest.raises(TypeError, match=r"0 <= k <= 5"):
            _check_k(bad, 5)
        with pytest.raises(TypeError, match="integer"):
            _check_k_type(bad)
    with pytest.raises(TypeError, match="bool"):
        _check_k_type(True)


def test_axis_rules():
    assert _topk_axis(None, 3) is None
    assert _topk_axis(-1, 3) == 2
    with pytest.raises(np.exceptions.AxisError if hasattr(np, "exceptions") else np.AxisError):
        _topk_axis(3, 3)
    with pytest.raises(TypeError):
        _topk_axis((0, 1), 3)
    with pytest.raises(TypeError):
        _topk_axis(True, 3)


@pytest.mark.parametrize("dev", [H100, A100], ids=["H100", "A100"])
def test_plan_regimes(dev):
    th = _dispatch.topk_thresholds(dev)
    few, cols = th["split_rows"], th["split_cols"]
    f32 = ("float32", "float32")
    # seg: few rows, next_pow2(k) <= seg_kp_max, enough segments for k
    assert th["seg_rows"] <= few
    _, nseg = _dispatch.topk_seg_packs(cols, "float32")
    kseg = nseg // th["seg_min_segs_per_k"]
    assert 1 <= kseg and 2 * kseg > th["seg_kp_max"] // 2  # the segment bound, not kp, decides here
    assert _dispatch.plan_topk(th["seg_rows"] - 1, cols, kseg, *f32, dev).regime == "seg"
    assert _dispatch.plan_topk(th["seg_rows"] - 1, cols, kseg + 1, *f32, dev).regime == "split"
    assert _dispatch.plan_topk(1, 10 ** 6, th["seg_kp_max"], *f32, dev).regime == "seg"
    assert _dispatch.plan_topk(1, 10 ** 6, th["seg_kp_max"] + 1, *f32, dev).regime == "split"
    assert _dispatch.plan_topk(1, 10 ** 6, 5, *f32, dev, "unfused").kernel.startswith("topk_seg<")
    assert _dispatch.plan_topk(few - 1, cols, 100, *f32, dev).regime == "split"
    assert _dispatch.plan_topk(few, cols, 5, *f32, dev).regime == "block"
    assert _dispatch.plan_topk(few - 1, cols - 1, 100, *f32, dev).regime == "block"
    assert _dispatch.plan_topk(1, 10 ** 6, th["kp_max"], *f32, dev).regime == "split"
    assert _dispatch.plan_topk(1, 10 ** 6, th["kp_max"] + 1, *f32, dev).regime == "sort"
    assert _dispatch.plan_topk(1, th["max_packed_row"], 5, *f32, dev).regime != "sort"
    assert _dispatch.plan_topk(1, th["max_packed_row"] + 1, 5, *f32, dev).regime == "sort"
    # double compute indexes any row
    assert _dispatch.plan_topk(1, th["max_packed_row"] + 1, 5, "float32", "float64", dev).regime == "seg"
    assert _dispatch.plan_topk(1, 10 ** 6, 5, *f32, dev, "safe").regime == "safe"
    assert _dispatch.plan_topk(1, 10 ** 6, 5, *f32, dev, "unfused").regime == "unfused"
    for rows, L, k in [(1, 128256, 50), (4096, 131072, 1024), (64, 262144, 1000), (3, 7, 7),
                       (200, 65536, 64), (1, 3 * 10 ** 6, 33)]:
        for ti in DTYPES:
            for to in DTYPES:
                for algo in ALGOS:
                    p = _dispatch.plan_topk(rows, L, k, ti, to, dev, algo)
                    pack = 16 // np_dtype(ti).itemsize
                    if p.regime == "csm":  # (test_csm_plan)
                        assert p.kernel.startswith("topk_csm<") and dev.cc >= 90
                        continue
                    assert p.smem <= _dispatch.TOPK_SMEM_MAX and p.merge_smem <= _dispatch.TOPK_SMEM_MAX
                    assert p.block[0] % 32 == 0 and p.block[0] <= _dispatch.TOPK_MAX_THREADS
                    if p.seg_packs:  # every segment of the row has a block
                        assert p.kernel.startswith("topk_seg<") and p.kp >= k
                        assert p.splits * p.seg_per_block * p.seg_packs * pack >= L + pack - 1
                        assert -(-(L + pack - 1) // pack) <= _dispatch.TOPK_SEG_WCAP * p.seg_packs
                        assert p.block[0] <= _dispatch.TOPK_SEG_THREADS and p.grid[1] == rows
                    elif p.regime != "sort":
                        assert p.kp >= k and p.splits * p.pps * pack >= L
                        # block lists of float compute prune by radix selection; their
                        # buffer takes a whole batch beyond the pruned list
                        radix = p.block_lists and p.compute_dtype == "float32"
                        assert p.kernel.startswith("topk_radix<" if radix else "topk_stream<")
                        if radix:
                            csz = 4
                            batch = p.block[0] * max(1, _dispatch.TOPK_BATCH_ELEMS[csz] // pack) * pack
                            assert p.inc >= batch + _dispatch.TOPK_RADIX_ROOM
                            assert p.smem == (p.kp + p.inc) * p.cand_bytes


@pytest.mark.parametrize("dev", [H100, A100], ids=["H100", "A100"])
def test_seg_grid_one_wave(dev):
    """Up to TOPK_SEG_FILL_ROWS rows a seg grid fits the resident blocks
    (one wave); every segment still has a block."""
    D = _dispatch
    n = 0
    for dt in ("float32", "bfloat16", "float64"):
        pack = 16 // np_dtype(dt).itemsize
        for rows in (1, 8, 17, 33, 63, 64, 65, 100):
            for L in (40000, 131072, 262144, 10 ** 6):
                for k in (1, 5, 50):
                    p = D.plan_topk(rows, L, k, dt, dt, dev)
                    if p.regime != "seg":
                        continue
                    n += 1
                    assert p.splits * p.seg_per_block * p.seg_packs * pack >= L + pack - 1
                    if rows <= D.TOPK_SEG_FILL_ROWS:
                        assert p.grid[0] * rows <= max(rows, D.TOPK_SEG_RESIDENT_PER_SM * dev.sm_count), (dt, rows, L, k)
    assert n > 0


@pytest.mark.parametrize("dev", [H100, A100], ids=["H100", "A100"])
def test_csm_plan(dev):
    """csm (a cluster holds each row on chip): sm_90 only, float compute,
    online, k <= TOPK_CSM_KP_MAX, rows of TOPK_CSM_MIN_ROW_BYTES and more
    (longer than TOPK_CSM_ALL_K_ROW_BYTES only from TOPK_CSM_LONG_MIN_K, from
    TOPK_CSM_MID_MIN_K for TOPK_CSM_MID_ROWS .. SMs / 16 rows, or from
    TOPK_CSM_MANY_ROWS rows),
    the largest cluster with rows x cluster <= SMs whose blocks hold
    TOPK_CSM_MIN_PACKS .. TOPK_CSM_MAX_BYTES of the row."""
    D = _dispatch
    seen = set()
    for dt in ("float16", "bfloat16", "float32", "float64"):
        isz = np_dtype(dt).itemsize
        pack = 16 // isz
        for out in ("float32", "float64"):
            mid = D.TOPK_CSM_MID_ROWS
            for rows in (1, 2, mid - 1, mid, dev.sm_count // 16, dev.sm_count // 16 + 1, 16, 17, 33, 63, 64, 66, 67,
                         128, 132, 133):
                for nbytes in (D.TOPK_CSM_MIN_ROW_BYTES - 16, D.TOPK_CSM_MIN_ROW_BYTES, D.TOPK_CSM_ALL_K_ROW_BYTES,
                               D.TOPK_CSM_ALL_K_ROW_BYTES + 16, 2 ** 20, 2 ** 22):
                    L = nbytes // isz
                    for k in (1, D.TOPK_CSM_MID_MIN_K - 1, D.TOPK_CSM_MID_MIN_K, 17, D.TOPK_CSM_LONG_MIN_K - 1,
                              D.TOPK_CSM_LONG_MIN_K, D.TOPK_CSM_KP_MAX, D.TOPK_CSM_KP_MAX + 1):
                        for algo in ("auto", "online", "safe", "unfused"):
                            p = D.plan_topk(rows, L, k, dt, out, dev, algo)
                            packs = -(-(L + pack - 1) // pack)
                            fits = [cs for cs in D.TOPK_CSM_CLUSTERS if rows * cs <= dev.sm_count
                                    and D.TOPK_CSM_MIN_PACKS <= -(-packs // cs)
                                    and -(-packs // cs) * 16 <= D.TOPK_CSM_MAX_BYTES]
                            want = (dev.cc >= 90 and algo in ("auto", "online") and dt != "float64"
                                    and out != "float64" and k <= D.TOPK_CSM_KP_MAX
                                    and L * isz >= D.TOPK_CSM_MIN_ROW_BYTES
                                    and (L * isz <= D.TOPK_CSM_ALL_K_ROW_BYTES or rows >= D.TOPK_CSM_MANY_ROWS
                                         or k >= D.TOPK_CSM_LONG_MIN_K
                                         or (k >= D.TOPK_CSM_MID_MIN_K and mid <= rows <= dev.sm_count // 16))
                                    and bool(fits))
                            assert (p.regime == "csm") == want, (dt, out, rows, L, k, algo, p.regime)
                            if want:
                                cs = fits[0]
                                seen.add(cs)
                                ef = ", true" if D.topk_evict_first(rows, L, dt) else ""
                                assert p.kernel == f"topk_csm<{D.CTYPE[dt]}, {cs}{ef}>"
                                assert p.grid == (cs, rows) and p.block == (D.TOPK_CSM_THREADS,)
                                assert p.pps == -(-packs // cs) and p.smem == p.pps * 16
                                assert cs * p.pps * pack >= L + pack - 1  # every element staged
                                assert p.splits == 1 and not p.seg_packs and p.kp >= k
    assert seen == (set(D.TOPK_CSM_CLUSTERS) if dev.cc >= 90 else set())


@pytest.mark.parametrize("dev", [H100, A100], ids=["H100", "A100"])
def test_seg_many_rows_segments(dev):
    """From seg_rows rows on, seg needs KP >= TOPK_SEG_MANY_MIN_KP and takes
    segments of whole batches (32 lanes x the kernel's unroll) where at
    least seg_min_segs_per_k x k of them remain, else the shorter ones."""
    th = _dispatch.topk_thresholds(dev)
    many = th["seg_rows"]
    for dt in DTYPES:
        pack = 16 // np_dtype(dt).itemsize
        csz = 8 if dt == "float64" else 4
        batch = 32 * max(1, _dispatch.TOPK_SEG_BATCH_ELEMS[csz] // pack)
        assert _dispatch.plan_topk(many, 131072, 50, dt, dt, dev).seg_packs % batch == 0
        for L in (20000, 40000, 131072, 10 ** 6):
            for k in (17, 33, 64):
                p = _dispatch.plan_topk(many, L, k, dt, dt, dev)
                if p.regime != "seg":
                    continue
                whole = p.seg_packs % batch == 0
                sp_w, n_w = _dispatch.topk_seg_packs(L, dt, max(32, _dispatch.TOPK_SEG_MANY_MIN_ELEMS // pack),
                                                     batch)
                assert whole == (n_w >= th["seg_min_segs_per_k"] * k), (dt, L, k, p.seg_packs)
                assert p.seg_packs * pack >= _dispatch.TOPK_SEG_MANY_MIN_ELEMS
        assert _dispatch.plan_topk(many, 131072, 16, dt, dt, dev).regime == "block"


def _seg_unroll(p):
    """(unroll, pipe) of a topk_seg plan's kernel name."""
    head, flags = _dispatch.topk_seg_flags(p.kernel)
    return int(head.split(", ")[3]), flags["pipe"]


@pytest.mark.parametrize("dev", [H100, A100], ids=["H100", "A100"])
def test_seg_fit_unroll_rule(dev, monkeypatch):
    """topk_seg's unroll is halved while a segment fills at most half a warp's
    batch (32 lanes x unroll packs), and exactly those plans stream as a
    pipeline (PIPE); with TOPK_SEG_FIT_UNROLL off every seg plan keeps the
    batch of TOPK_SEG_BATCH_ELEMS and no pipeline."""
    seen = set()
    for dt in ("float32", "bfloat16", "float64"):
        pack = 16 // np_dtype(dt).itemsize
        csz = 8 if dt == "float64" else 4
        full = max(1, _dispatch.TOPK_SEG_BATCH_ELEMS[csz] // pack)
        for rows in (1, 8, 64, 200, 263, 512, 4096):
            for L in (2048, 8192, 16384, 32000, 50257, 131072):
                for k in (1, 5, 17, 50):
                    for algo in ("auto", "unfused"):
                        p = _dispatch.plan_topk(rows, L, k, dt, dt, dev, algo)
                        if not p.kernel.startswith("topk_seg<"):
                            continue
                        u, pipe = _seg_unroll(p)
                        want = full
                        while want > 1 and p.seg_packs <= 16 * want:
                            want //= 2
                        assert (u, pipe) == (want, want < full), (dt, rows, L, k, p)
                        seen.add((dt, u, pipe))
                        with monkeypatch.context() as m:
                            m.setattr(_dispatch, "TOPK_SEG_FIT_UNROLL", False)
                            q = _dispatch.plan_topk(rows, L, k, dt, dt, dev, algo)
                        assert _seg_unroll(q) == (full, False) and q.grid == p.grid
    # both kinds of plan occur, and the halved unrolls are 1 and 2 in float32
    assert {("float32", 1, True), ("float32", 2, True), ("float32", 4, False), ("bfloat16", 1, True),
            ("bfloat16", 2, False)} <= seen, seen


def _seg_rule_plans(shapes, ks):
    """(rows, k, plan, flags) of every topk_seg plan the dispatcher makes
    for float32 / bfloat16 / float64, ``shapes`` (rows, L), ``ks``, auto and
    unfused (flags: topk_seg_flags); each name is checked to be in
    all_topk_kernels and to round-trip through the load-form helper."""
    names = {n for _, n in _dispatch.all_topk_kernels(H100)}
    for dt in ("float32", "bfloat16", "float64"):
        for rows, L in shapes:
            for k in ks:
                for algo in ("auto", "unfused"):
                    p = _dispatch.plan_topk(rows, L, k, dt, dt, H100, algo)
                    if p.kernel.startswith("topk_seg<"):
                        assert p.kernel in names and p.kernel in _dispatch._topk_load_forms(p.kernel)
                        yield rows, k, p, _dispatch.topk_seg_flags(p.kernel)[1]


def test_seg_two_rule():
    """topk_seg keeps two candidates a segment (its TWO flag) exactly from
    k = TOPK_SEG_TWO_MIN_K on (TOPK_SEG_TWO_MANY_MIN_K for many-row plans),
    in every load form and mode; the names round-trip through the load-form
    helper, and every seg name the dispatcher can choose is in
    all_topk_kernels (both TWO forms among them)."""
    two_k, many_k = _dispatch.TOPK_SEG_TWO_MIN_K, _dispatch.TOPK_SEG_TWO_MANY_MIN_K
    assert _dispatch.TOPK_SEG_PICK_MAX_K < many_k <= two_k <= _dispatch.TOPK_SEG_KP_MAX
    many_rows = _dispatch.TOPK_SEG_ROWS_PER_SM * H100.sm_count
    seen = set()
    for rows, k, p, f in _seg_rule_plans(((1, 131072), (64, 128256), (64, 262144), (many_rows - 1, 32000),
                                          (many_rows, 32000), (4096, 32000)),
                                         (2, many_k - 1, many_k, two_k - 1, two_k, 50, 64)):
        assert f["two"] == (k >= (many_k if rows >= many_rows else two_k)), (rows, k, p.kernel)
        assert f["two"] == _dispatch.topk_seg_two(k, rows >= many_rows)
        seen.add((f["two"], rows >= many_rows, k))
    assert {(False, False, two_k - 1), (True, False, two_k), (True, True, many_k)} <= seen, seen
    assert _dispatch._topk_seg_name("float, float, TOPK_ONLINE, 4", False, False, True) == \
        "topk_seg<float, float, TOPK_ONLINE, 4, false, false, true>"
    assert _dispatch._topk_seg_name("float, float, TOPK_ONLINE, 4", True, False) == \
        "topk_seg<float, float, TOPK_ONLINE, 4, true>"


def test_seg_pick_rule():
    """topk_seg's last block picks the k best segment maxima by warp argmaxes
    (its PICK flag) exactly for 2 <= k <= TOPK_SEG_PICK_MAX_K (a single row:
    TOPK_SEG_PICK_ONE_ROW_MAX_K), never with TWO,
    in every load form and mode; every such name is in all_topk_kernels and
    the names round-trip through the load-form helper."""
    pick_k, one_k = _dispatch.TOPK_SEG_PICK_MAX_K, _dispatch.TOPK_SEG_PICK_ONE_ROW_MAX_K
    assert 2 <= one_k <= pick_k < _dispatch.TOPK_SEG_TWO_MIN_K
    seen = set()
    for rows, k, p, f in _seg_rule_plans(((1, 131072), (64, 128256), (64, 262144), (263, 65536)),
                                         (1, 2, one_k, one_k + 1, pick_k, pick_k + 1, 50)):
        assert f["pick"] == (2 <= k <= (pick_k if rows > 1 else one_k)), (rows, k, p.kernel)
        assert not (f["pick"] and f["two"])
        seen.add(f["pick"])
    assert seen == {False, True}
    assert _dispatch._topk_seg_name("float, float, TOPK_ONLINE, 4", False, True, False, True) == \
        "topk_seg<float, float, TOPK_ONLINE, 4, false, true, false, true>"
    assert _dispatch._topk_load_forms("topk_seg<float, float, TOPK_ONLINE, 4, false, true, false, true>", True,
                                      False)[1] == "topk_seg<float, float, TOPK_ONLINE, 4, false, true, true>"


def _evict_first(p):
    """Whether a topk_seg / topk_csm plan's kernel reads evict-first (EF)."""
    args = p.kernel[p.kernel.index("<") + 1:-1].split(", ")
    i = 5 if p.kernel.startswith("topk_seg<") else 2
    return len(args) > i and args[i] == "true"


@pytest.mark.parametrize("dev", [H100, A100], ids=["H100", "A100"])
def test_evict_first_rule(dev):
    """topk_seg and topk_csm read evict-first exactly for arrays of
    TOPK_EVICT_FIRST_MIN_BYTES .. TOPK_EVICT_FIRST_MAX_BYTES (each bound +-1
    row); the rest of the plan does not depend on it; the compile-check
    enumeration lists both forms of both kernels (csm: sm_90)."""
    D = _dispatch
    names = {n for _, n in D.all_topk_kernels(dev)}
    seen = set()
    for dt in ("float32", "bfloat16", "float64"):
        isz = np_dtype(dt).itemsize
        for L in (32768, 131072, 262144, 10 ** 6):
            edges = [b // (L * isz) for b in (D.TOPK_EVICT_FIRST_MIN_BYTES, D.TOPK_EVICT_FIRST_MAX_BYTES)]
            for rows in sorted({1, 8, 64, 4096} | {e + d for e in edges for d in (-1, 0, 1)} - {0}):
                for k in (1, 5, 50):
                    for algo in ("auto", "unfused"):
                        p = D.plan_topk(rows, L, k, dt, dt, dev, algo)
                        kind = p.kernel[:p.kernel.index("<")]
                        if kind not in ("topk_seg", "topk_csm"):
                            continue
                        n = rows * L * isz
                        ef = D.TOPK_EVICT_FIRST_MIN_BYTES <= n <= D.TOPK_EVICT_FIRST_MAX_BYTES
                        assert _evict_first(p) == ef == D.topk_evict_first(rows, L, dt), (dt, rows, L, k, p.kernel)
                        assert p.kernel in names, p.kernel
                        seen.add((kind, ef))
                        old = D.TOPK_EVICT_FIRST_MAX_BYTES
                        try:
                            D.TOPK_EVICT_FIRST_MAX_BYTES = 0
                            q = D.plan_topk(rows, L, k, dt, dt, dev, algo)
                        finally:
                            D.TOPK_EVICT_FIRST_MAX_BYTES = old
                        assert not _evict_first(q) and q.kernel in names
                        assert q.kernel == D._topk_load_forms(p.kernel)[0]
                        assert p.kernel == D._topk_load_forms(p.kernel)[int(ef)]
                        assert (q.grid, q.block, q.smem, q.pps, q.seg_packs, q.seg_per_block) == \
                            (p.grid, p.block, p.smem, p.pps, p.seg_packs, p.seg_per_block)
    want = {("topk_seg", True), ("topk_seg", False)}
    if dev.cc >= 90:
        want |= {("topk_csm", True), ("topk_csm", False)}
    assert seen == want, seen


@pytest.mark.parametrize("dev", [H100, A100], ids=["H100", "A100"])
def test_topk_enumeration_covers_plans(dev):
    """Every kernel plan_topk picks over a grid of shapes, k, dtypes and
    algorithms (each regime's edges among them) is in all_topk_kernels, the
    list the NVRTC compile check builds."""
    D = _dispatch
    names = {n for _, n in D.all_topk_kernels(dev)}
    missing = set()
    n = 0
    for ti in DTYPES:
        for to in DTYPES:
            for algo in ALGOS:
                for rows in (1, 8, 64, 65, 131, 263, 264, 4096, 65535, 65536):
                    for L in (100, 2048, 8192, 32768, 50257, 131072, 262144, 10 ** 6):
                        for k in (1, 5, 17, 50, 64, 65, 256, 1024, 1025):
                            if k > L or rows * L > 2 ** 33:
                                continue
                            for name in D.plan_topk(rows, L, k, ti, to, dev, algo).kernels():
                                n += 1
                                if name not in names:
                                    missing.add((name, rows, L, k, ti, to, algo))
    assert n > 0 and not missing, sorted(missing)[:10]


def test_seg_constants_match_kernel():
    """The dispatcher's view of topk_seg's compile-time limits (block size,
    segment capacity, list length) is the kernel's."""
    import re
    from cusoftmax._loader import kernel_dir
    import os
    src = open(os.path.join(kernel_dir(), "topk.cu")).read()

    def define(name):
        return int(re.search(rf"#define {name} (\d+)", src).group(1))

    assert _dispatch.TOPK_SEG_THREADS <= define("TOPK_SEG_THREADS")
    assert _dispatch.TOPK_SEG_WCAP == define("TOPK_SEG_WMAX") and _dispatch.TOPK_SEG_WMAX <= _dispatch.TOPK_SEG_WCAP
    assert _dispatch.TOPK_SEG_KP_MAX == define("TOPK_SEG_KP_MAX")
    assert _dispatch.TOPK_SEG_PICK_MAX_K <= define("TOPK_SEG_PICK_KMAX")  # the PICK tail's slots
    assert (define("TOPK_SEG_RANK_MAX"), define("TOPK_SEG_INC")) == (256, 2048)  # test_seg_regime's paths
    assert _dispatch.TOPK_CSM_THREADS == define("TOPK_CSM_THREADS")
    assert _dispatch.TOPK_CSM_KP_MAX == define("TOPK_CSM_KP_MAX")
    # lane groups of 4 x cluster lanes: at most a warp
    assert define("TOPK_CSM_THREADS") * max(_dispatch.TOPK_CSM_CLUSTERS) // define("TOPK_CSM_GROUPS") <= 32
    assert 2 * _dispatch.TOPK_CSM_KP_MAX <= define("TOPK_CSM_GROUPS")  # k distinct group maxima with room


def test_direct_launch_selection():
    """Which prepared calls take softmax_topk's direct launch: one-launch
    plans (block, stream, seg, csm) on rows read straight from x with results in
    x's layout; not a split (two launches), a copied layout or a moved axis."""
    from cusoftmax import _topk
    if _topk._drv_launch is None:
        pytest.skip("CuPy's driver launch binding is not importable")

    class _Fn:  # a compiled kernel's stand-in: only its handle is read
        class kernel:
            ptr = 1234

    def prepared(rows, L, k, copy=False, moved=False):
        p = _topk._Prepared()
        p.kind, p.copy, p.R, p.L, p.sx, p.k, p.code, p.log = "fused", copy, rows, L, L, k, 2, 0
        p.plan = _dispatch.plan_topk(rows, L, k, "float32", "float32", H100)
        p.out_shape = (rows, k)
        p.moved_shape = (k, rows) if moved else (rows, k)
        p.fn, p.md_dtype = _Fn(), np.dtype(np.float32)
        _topk._seg_layout(p)
        return p

    p = prepared(1, 128256, 5)
    prm = _topk._fast_params(p)
    assert p.plan.regime == "seg" and prm is not None and p.fptr == 1234
    wmax = _dispatch.TOPK_SEG_WCAP
    assert p.ws_bytes == 2 * wmax * 8 + (wmax + 2 * p.plan.splits) * 4
    assert list(prm.vals)[7:] == [128256, 128256, 5, 8, p.plan.seg_packs, p.plan.seg_per_block, 2, 0]
    assert list(prm.vals)[:7] == [0] * 7  # pointers: filled per call
    p = prepared(8, 32768, 50)  # csm: (x, vals, idx, L, sx, k, packs a block, code, log), no workspace
    prm = _topk._fast_params(p)
    assert p.plan.regime == "csm" and prm is not None and p.ws_bytes == 0
    assert list(prm.vals) == [0, 0, 0, 32768, 32768, 50, p.plan.pps, 2, 0]
    assert p.dims == (8, 8, 1, _dispatch.TOPK_CSM_THREADS, 1, 1, p.plan.smem)
    p = prepared(4096, 1024, 5)
    assert p.plan.regime == "block" and _topk._fast_params(p) is not None and p.ws_bytes == 0
    assert _topk._fast_params(prepared(1, 10 ** 6, 100)) is None  # split
    assert _topk._fast_params(prepared(4096, 1024, 5, copy=True)) is None
    assert _topk._fast_params(prepared(4096, 1024, 5, moved=True)) is None


# (NVRTC compile check of every top-k instantiation: tests/test_compile.py)


def test_reference_rules():
    x = np.array([[1.0, 3.0, 3.0, np.nan, -np.inf, 2.0],
                  [0.0, np.inf, 1.0, 1.0, 1.0, -np.inf]])
    v, i = reference.softmax_topk(x, 6)
    np.testing.assert_array_equal(i, [[1, 2, 5, 0, 4, 3], [1, 2, 3, 4, 0, 5]])
    assert np.isnan(v).all()


# ----------------------------------------------------------------------------
# GPU
# ----------------------------------------------------------------------------
@st.composite
def problems(draw):
    dtype = draw(st.sampled_from(DTYPES))
    rows = draw(st.integers(1, 4))
    L = draw(st.one_of(st.integers(1, 300), st.integers(300, 3000), st.integers(8000, 20000)))
    k = draw(st.one_of(st.just(0), st.just(1), st.just(L), st.just(L - 1), st.integers(0, min(L, 1100)),
                       st.integers(0, min(L, 70))))
    style = draw(st.sampled_from(["normal", "ties", "sorted", "wide", "specials", "neginf"]))
    algorithm = draw(st.sampled_from(ALGOS))
    log = draw(st.booleans())
    out = draw(st.sampled_from([None, None] + list(DTYPES)))
    seed = draw(st.integers(0, 2 ** 32 - 1))
    return dtype, rows, L, k, style, algorithm, log, out, seed


@pytest.mark.gpu
@settings(max_examples=150)
@given(problems())
def test_hypothesis(prob):
    dtype, rows, L, k, style, algorithm, log, out, seed = prob
    x = to_gpu(make_data(np.random.default_rng(seed), (rows, L), style), dtype)
    check(x, k, log=log, dtype=None if out is None else np_dtype(out), algorithm=algorithm)


@pytest.mark.gpu
@settings(max_examples=40)
@given(st.sampled_from(DTYPES), st.integers(1, 5), st.integers(1, 600), st.integers(0, 2 ** 32 - 1),
       st.sampled_from(["c", "f", "slice", "neg", "axis0", "3d", "none"]), st.sampled_from(ALGOS),
       st.booleans())
def test_layouts(dtype, rows, L, seed, layout, algorithm, log):
    rng = np.random.default_rng(seed)
    a = make_data(rng, (rows, L + 1), "ties" if seed % 2 else "normal")
    x = to_gpu(a, dtype)
    axis = -1
    if layout == "f":
        x = x.T.copy().T  # Fortran order
    elif layout == "slice":
        x = x[:, 1:]  # rows start mid-vector
    elif layout == "neg":
        x = x[:, ::-1]  # reversed axis: indices count along the view
    elif layout == "axis0":
        axis = 0
    elif layout == "3d":
        x = to_gpu(make_data(rng, (2, rows, L), "ties"), dtype)
        axis = 1
    elif layout == "none":
        axis = None
    n = x.size if axis is None else x.shape[axis]
    k = int(rng.integers(0, n + 1))
    check(x, k, axis=axis, log=log, algorithm=algorithm)


def _kp_edges():
    ks = set()
    kp = 1
    while kp <= 2 * _dispatch.TOPK_KP_MAX:
        ks.update((kp - 1, kp, kp + 1))
        kp *= 2
    ks.discard(0)
    return sorted(ks)


@pytest.mark.gpu
@pytest.mark.parametrize("k", _kp_edges())
def test_k_thresholds(k):
    rng = np.random.default_rng(k)
    for rows, L, style in [(3, max(k, 3000), "normal"), (2, max(k, 20000), "ties")]:
        x = to_gpu(make_data(rng, (rows, L), style), "float32")
        algos = ALGOS if k in (1, 63, 64, 65, 1024, 1025) else ("auto",)
        for algo in algos:
            check(x, k, algorithm=algo, log=bool(k % 2))


@pytest.mark.gpu
def test_row_and_column_thresholds():
    dev = _device()
    th = _dispatch.topk_thresholds(dev)
    rng = np.random.default_rng(1)
    few, cols = th["split_rows"], th["split_cols"]
    regimes = set()
    for rows in (few - 1, few, few + 1):
        for L in (cols - 1, cols, cols + 1):
            x = to_gpu(make_data(rng, (rows, L), "ties"), "float32")
            regimes.add(_dispatch.plan_topk(rows, L, 50, "float32", "float32", dev).regime)
            check(x, 50)
    assert regimes == {"block", "split"}
    # every block-size / split-count change of the stream kernel, +-1 column
    edges = set()
    prev = None
    for L in range(5, 70000):
        p = _dispatch.plan_topk(2, L, 5, "bfloat16", "bfloat16", dev)
        sig = (p.block, p.splits)
        if sig != prev and prev is not None:
            edges.update((L - 1, L, L + 1))
        prev = sig
    assert len(edges) >= 9
    for L in sorted(edges):
        x = to_gpu(make_data(rng, (2, L + 3), "normal"), "bfloat16")
        check(x, min(L, 5))
        check(x[:, 3:], min(L, 40), algorithm="online")  # misaligned rows


def _seg_candidates(row, k, sp, pack):
    """Host model of topk_seg's candidate count for one aligned row without
    NaN: elements not worse than tau, the k-th best of the segments' maxima
    (value descending, index ascending)."""
    L = row.size
    seg = np.arange(L) // pack // sp
    starts = np.flatnonzero(np.r_[True, seg[1:] != seg[:-1]])
    best = np.array([s + np.argmax(row[s:e]) for s, e in zip(starts, np.r_[starts[1:], L])])
    if best.size <= k:
        return L
    order = np.lexsort((best, -row[best]))
    t = best[order[k - 1]]
    return int(np.sum((row > row[t]) | ((row == row[t]) & (np.arange(L) <= t))))


@pytest.fixture
def no_csm(monkeypatch):
    """The csm regime switched off (so few-row calls take seg / split), the
    prepared-call cache cleared before and after."""
    from cusoftmax import _topk
    _topk._cache.clear()
    monkeypatch.setattr(_dispatch, "TOPK_CSM_KP_MAX", 0)
    yield
    _topk._cache.clear()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_csm_regime(dtype):
    """The row-on-chip few-rows regime at every cluster size (rows x cluster
    = SMs): typical rows (candidates ranked directly), hundreds of tied
    maxima and sorted rows (the radix selection of a tighter bound), small
    integers, mostly / all -inf rows, NaN rows, misaligned rows, k from 1
    to the kp bound, plain and log."""
    dev = _device()
    if dev.cc < 90:
        pytest.skip("the csm regime is sm_90 only")
    rng = np.random.default_rng(12)
    isz = np_dtype(dtype).itemsize
    L = 32768  # 128 KiB rows in float32 (a cluster size 1 block holds one), 64 KiB in 16-bit
    base = rng.standard_normal(L) * 3
    plateau = base.copy()
    plateau[rng.choice(L, 2400, replace=False)] = 100.0  # hundreds of tied maxima
    nan_row = base.copy()
    nan_row[77] = np.nan
    # the top concentrated in a few of the blocks' groups (packs q with q mod
    # 512 < 4, in the row's first eighth)
    grouped = base.copy()
    cols = np.arange(L)
    grouped[((cols // (16 // isz)) % 512 < 4) & (cols < L // 8)] += 50.0
    kinds = [base, plateau, np.sort(base), rng.integers(-3, 4, L).astype(np.float64),
             np.where(rng.random(L) < 0.9, -np.inf, base), np.full(L, -np.inf), nan_row,
             make_data(rng, (L,), "specials"), grouped]
    for cs in _dispatch.TOPK_CSM_CLUSTERS:
        rows = max(len(kinds) if cs == 8 else 1, dev.sm_count // cs)
        if rows * cs > dev.sm_count:
            rows = dev.sm_count // cs
        a = np.stack([kinds[i % len(kinds)] for i in range(rows)])
        xs = to_gpu(a, dtype)
        p = _dispatch.plan_topk(rows, L, 50, dtype, dtype, dev)
        assert p.regime == "csm" and p.grid == (cs, rows), (cs, p)
        for k in ((1, 2, 17, 50, 63, 64) if cs == 8 else (1, 50)):
            check(xs, k, log=k in (2, 50))
    # misaligned rows (a row start mid-vector); longer rows from TOPK_CSM_LONG_MIN_K
    x2 = to_gpu(make_data(rng, (3, L + 3), "normal"), dtype)
    assert _dispatch.plan_topk(3, L, 5, dtype, dtype, dev).regime == "csm"
    check(x2[:, 3:], 5)
    check(x2[:, 1:-2], 64, log=True)
    L2 = 4 * L + 5
    x3 = to_gpu(make_data(rng, (2, L2 + 1), "normal"), dtype)
    assert _dispatch.plan_topk(2, L2, _dispatch.TOPK_CSM_LONG_MIN_K, dtype, dtype, dev).regime == "csm"
    assert _dispatch.plan_topk(2, L2, _dispatch.TOPK_CSM_LONG_MIN_K - 1, dtype, dtype, dev).regime != "csm"
    check(x3[:, 1:], _dispatch.TOPK_CSM_LONG_MIN_K)
    check(x3[:, :L2], 64, log=True)
    # ... and from TOPK_CSM_MID_MIN_K on TOPK_CSM_MID_ROWS rows (clusters of 8 on at most half the SMs)
    R = _dispatch.TOPK_CSM_MID_ROWS
    if R * 16 <= dev.sm_count:
        x4 = to_gpu(make_data(rng, (R, L2), "normal"), dtype)
        assert _dispatch.plan_topk(R, L2, _dispatch.TOPK_CSM_MID_MIN_K, dtype, dtype, dev).regime == "csm"
        assert _dispatch.plan_topk(R, L2, _dispatch.TOPK_CSM_MID_MIN_K - 1, dtype, dtype, dev).regime != "csm"
        check(x4, _dispatch.TOPK_CSM_MID_MIN_K)
        check(x4, 17, log=True)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_evict_first_forms(dtype, monkeypatch):
    """seg and csm in their evict-first load form (EF): arrays of the
    dispatcher's size on their own, and with TOPK_EVICT_FIRST_MIN_BYTES at 0
    small rows of specials, ties, sorted and misaligned rows in both
    regimes (csm on sm_90), checked against the reference."""
    from cusoftmax import _topk
    dev = _device()
    rng = np.random.default_rng(21)
    # natural size: 64 rows of 131072 (float32: seg; bfloat16: csm on sm_90)
    L = 131072
    assert _dispatch.topk_evict_first(64, L, dtype)
    x = to_gpu(make_data(rng, (64, L + 1), "normal"), dtype)
    for k in (1, 5, 50):
        p = _dispatch.plan_topk(64, L, k, dtype, dtype, dev)
        assert p.kernel.endswith(", true>") and p.regime in ("seg", "csm"), p.kernel
        check(x[:, :L], k)
    check(x[:, 1:], 50, log=True)
    # small rows in the EF forms
    _topk._cache.clear()
    monkeypatch.setattr(_dispatch, "TOPK_EVICT_FIRST_MIN_BYTES", 0)
    try:
        L = 32768
        a = np.stack([make_data(rng, (L + 3,), st) for st in ("normal", "ties", "sorted", "specials", "neginf")])
        a[0, 5] = np.nan
        xs = to_gpu(a, dtype)
        for csm in ((True, False) if dev.cc >= 90 else (False,)):
            if not csm:
                monkeypatch.setattr(_dispatch, "TOPK_CSM_KP_MAX", 0)
                _topk._cache.clear()
            for k in (1, 5, 50):
                p = _dispatch.plan_topk(5, L, k, dtype, dtype, dev)
                assert p.regime == ("csm" if csm else "seg") and p.kernel.endswith(", true>"), p.kernel
                check(xs[:, :L], k)
                check(xs[:, 3:], k, log=k == 5)
    finally:
        _topk._cache.clear()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64"])
def test_seg_regime(dtype, no_csm):
    """The one-launch few-rows regime: its three selection paths (candidates
    ranked directly, one compaction, overflow) shown taken by the host model,
    specials, misaligned rows, k at the kp and segment-count bounds, and the
    unfused path's selection (csm switched off: it would take these rows)."""
    dev = _device()
    th = _dispatch.topk_thresholds(dev)
    rng = np.random.default_rng(11)
    L = 131072
    pack = 16 // np_dtype(dtype).itemsize
    sp, nseg = _dispatch.topk_seg_packs(L, dtype)
    assert _dispatch.plan_topk(th["seg_rows"] - 1, L, 50, dtype, dtype, dev).regime == "seg"
    base = rng.standard_normal(L) * 3
    plateau = base.copy()
    plateau[rng.choice(L, 2400, replace=False)] = 100.0  # hundreds of tied maxima
    rows = [base, plateau, np.sort(base), rng.integers(-3, 4, L).astype(np.float64),
            np.where(rng.random(L) < 0.9, -np.inf, base), np.full(L, -np.inf)]
    a = np.stack(rows)
    xs = to_gpu(a, dtype)
    if dtype == "float32":
        af = a.astype(np.float32)
        counts = [_seg_candidates(r, 50, sp, pack) for r in af[:4]]
        rank_max, inc = 256, 2048  # TOPK_SEG_RANK_MAX, TOPK_SEG_INC in kernels/topk.cu
        assert counts[0] <= rank_max < counts[1] <= inc < counts[2], counts
    nan_row = np.array(base)
    nan_row[77] = np.nan
    specials = to_gpu(np.stack([nan_row, make_data(rng, (L,), "specials"), np.full(L, np.nan)]), dtype)
    for k in (1, 2, 50, 63, 64):
        check(xs, k, log=k == 50)
        check(specials, k)
    check(xs, 50, algorithm="unfused")
    # k = 1: the last block takes the best segment maximum (no ranking, no re-read)
    assert _dispatch.plan_topk(xs.shape[0], L, 1, dtype, dtype, dev).regime == "seg"
    check(xs, 1, log=True)
    check(specials, 1, log=True)
    check(xs, 1, algorithm="unfused")  # the same kernel, TOPK_SELECT (indices only)
    # misaligned rows (a row start mid-vector), every row count up to seg_rows - 1
    x2 = to_gpu(make_data(rng, (3, L + 3), "normal"), dtype)
    check(x2[:, 3:], 50)
    check(x2[:, 3:], 1)
    check(x2[:, 1:-2], 64, log=True)
    many = to_gpu(make_data(rng, (th["seg_rows"] - 1, 40000), "ties"), dtype)
    assert _dispatch.plan_topk(many.shape[0], 40000, 5, dtype, dtype, dev).regime == "seg"
    check(many, 5)
    # from seg_rows rows on: only longer lists (and longer segments)
    more = to_gpu(make_data(rng, (th["seg_rows"], 9000), "normal"), dtype)
    assert _dispatch.plan_topk(more.shape[0], 9000, 17, dtype, dtype, dev).regime == "seg"
    assert _dispatch.plan_topk(more.shape[0], 9000, 16, dtype, dtype, dev).regime == "block"
    check(more, 17, log=True)
    whole = to_gpu(make_data(rng, (th["seg_rows"], 20000), "normal"), dtype)
    p = _dispatch.plan_topk(whole.shape[0], 20000, 17, dtype, dtype, dev)
    csz = 8 if dtype == "float64" else 4
    assert p.regime == "seg" and p.seg_packs % (32 * max(1, _dispatch.TOPK_SEG_BATCH_ELEMS[csz] // pack)) == 0
    check(whole, 17)
    # k at the segment-count bound: seg at kseg, split above it
    _, n2 = _dispatch.topk_seg_packs(20000, dtype)
    kseg = min(n2 // th["seg_min_segs_per_k"], th["seg_kp_max"])
    x3 = to_gpu(make_data(rng, (2, 20000), "normal"), dtype)
    for k, regime in ((kseg, "seg"), (kseg + 1, "split" if kseg + 1 <= th["kp_max"] else "sort")):
        assert _dispatch.plan_topk(2, 20000, k, dtype, dtype, dev).regime == regime
        check(x3, k)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64"])
def test_seg_rank_full_chunks(dtype, no_csm):
    """topk_seg's ranking of the segment maxima from k = TOPK_SEG_TWO_MIN_K
    on (TWO: a thread a maximum counts the better ones among all W; the
    chunk sorts and binary searches before, where a chunk whose 32 maxima
    all beat a maximum had to count 32). Rows whose segment maxima fall along
    the row (one high element a segment, the rest far below) put the top k in
    the first k segments, so a lost or doubled rank shows (k > 32; every
    chunk beats the next); rising maxima, a second candidate a segment
    (re-read), maxima tied in threes (the lower index first); an even and an
    odd number of segments (the count reads the maxima in pairs)."""
    dev = _device()
    R = 5
    pack = 16 // np_dtype(dtype).itemsize
    parity = set()
    for L in (120512, 114716):  # 236 and 225 segments here
        for k in (33, 50, 64):
            p = _dispatch.plan_topk(R, L, k, dtype, dtype, dev)
            assert p.regime == "seg", p
            assert _dispatch.topk_seg_flags(p.kernel)[1]["two"] == (k >= _dispatch.TOPK_SEG_TWO_MIN_K)
            seg = p.seg_packs * pack  # elements a segment (aligned rows)
            nseg = -(-L // seg)
            assert nseg >= 2 * k and nseg > 64  # several full chunks of 32 maxima
            parity.add(nseg % 2)
            a = np.full((R, L), -1.0e4)
            starts = np.arange(nseg) * seg
            a[:, starts] = -np.arange(nseg, dtype=np.float64)  # exact in every dtype (integers <= 256)
            a[1, starts + 1] = -np.arange(nseg) - 0.5  # and a second candidate a segment (re-read)
            a[2] = a[2, ::-1]  # maxima rising along the row
            a[3, starts] = -(np.arange(nseg) // 3)  # maxima tied in threes
            a[4, starts[::-1]] = -(np.arange(nseg) // 3)  # ... rising
            check(to_gpu(a, dtype), k)
            check(to_gpu(a, dtype), k, log=True)
    assert parity == {0, 1}, parity


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64"])
def test_seg_pick_chunks(dtype, no_csm):
    """topk_seg's PICK tail (2 <= k <= TOPK_SEG_PICK_MAX_K): each chunk of 32
    segment maxima gives its k best and one warp takes the row's k best of
    those. Rows whose top k all lie in one chunk (segment maxima falling or
    rising along the row), with a second candidate a segment (re-read), with
    maxima tied in threes (the lower index first); 225 segments, so the last
    chunk holds one maximum; several rows and each row alone."""
    dev = _device()
    L = 114716  # 225 segments in every dtype here (7 full chunks and one of 1)
    pack = 16 // np_dtype(dtype).itemsize
    for R in (4, 1):
        for k in sorted({2, _dispatch.TOPK_SEG_PICK_ONE_ROW_MAX_K, _dispatch.TOPK_SEG_PICK_MAX_K}):
            p = _dispatch.plan_topk(R, L, k, dtype, dtype, dev)
            assert p.regime == "seg", p
            assert _dispatch.topk_seg_flags(p.kernel)[1]["pick"] == _dispatch.topk_seg_pick(R, k), p.kernel
            seg = p.seg_packs * pack
            nseg = -(-L // seg)
            assert nseg % 32 == 1, nseg
            a = np.full((4, L), -1.0e4)
            starts = np.arange(nseg) * seg
            a[:, starts] = -np.arange(nseg, dtype=np.float64)  # falling: the top k in the first chunk
            a[1, starts + 1] = -np.arange(nseg) - 0.5  # and a second candidate a segment
            a[2] = a[2, ::-1]  # rising: the top k in the last chunks
            a[3, starts] = -(np.arange(nseg) // 3)  # maxima tied in threes
            for x in ([to_gpu(a, dtype)] if R == 4 else [to_gpu(a[i:i + 1], dtype) for i in range(4)]):
                check(x, k)
                check(x, k, log=True)
                check(x, k, algorithm="unfused")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64"])
def test_seg_pipelined_stream(dtype, no_csm):
    """topk_seg's pipelined stream (PIPE, the halved unroll of short
    segments): one and several segments a warp, a segment ending mid-batch,
    misaligned rows, ties, sorted rows, -inf and NaN rows, every k path
    (k = 1, ranked candidates, compaction), plain, log and unfused; the same
    results with the pipeline off (the fixed batch)."""
    dev = _device()
    rng = np.random.default_rng(34)
    L = 8192
    cases = []
    base = rng.standard_normal(L) * 3
    plateau = base.copy()
    plateau[rng.choice(L, 600, replace=False)] = 100.0  # hundreds of tied maxima
    nan_row = base.copy()
    nan_row[4099] = np.nan
    kinds = [base, plateau, np.sort(base), rng.integers(-3, 4, L).astype(np.float64),
             np.where(rng.random(L) < 0.9, -np.inf, base), np.full(L, -np.inf), nan_row,
             make_data(rng, (L,), "specials")]
    a = np.stack([kinds[i % len(kinds)] for i in range(64)])
    # the k that take seg with these short segments (larger k: split / block)
    ks = {"float32": (1, 2, 5, 17), "bfloat16": (1, 2, 5), "float64": (1, 2, 5, 17, 50)}[dtype]
    cases.append((to_gpu(a, dtype), ks))
    # misaligned rows (a row start mid-vector), rows one pack short of a segment
    x2 = to_gpu(make_data(rng, (16, L + 3), "normal"), dtype)
    cases.append((x2[:, 3:], (1, 5)))
    cases.append((x2[:, 1:-9], (2, ks[-1])))
    # many rows, several segments a warp (float64's many-row segments are
    # always whole batches: no pipeline)
    if dtype != "float64":
        many = to_gpu(make_data(rng, (512, 32000), "ties"), dtype)
        cases.append((many, (33, 50)))
    for x, ks in cases:
        for k in ks:
            p = _dispatch.plan_topk(x.shape[0], x.shape[1], k, dtype, dtype, dev)
            assert p.regime == "seg" and _seg_unroll(p)[1], (x.shape, k, p)
            check(x, k, log=k == 5)
            if k == ks[0]:
                check(x, k, algorithm="unfused")
    # the same launches with the fixed batch give the same indices
    from cusoftmax import _topk
    _topk._cache.clear()
    old = _dispatch.TOPK_SEG_FIT_UNROLL
    try:
        _dispatch.TOPK_SEG_FIT_UNROLL = False
        for x, ks in cases[:2]:
            p = _dispatch.plan_topk(x.shape[0], x.shape[1], ks[-1], dtype, dtype, dev)
            assert not _seg_unroll(p)[1]
            check(x, ks[-1])
    finally:
        _dispatch.TOPK_SEG_FIT_UNROLL = old
        _topk._cache.clear()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("algorithm", ALGOS)
def test_k_extremes_and_specials(dtype, algorithm):
    rng = np.random.default_rng(7)
    L = 777
    rows = [make_data(rng, (L,), "normal"), make_data(rng, (L,), "ties"), np.full(L, -np.inf),
            np.where(rng.random(L) < 0.5, -np.inf, 1.0), make_data(rng, (L,), "specials"),
            np.full(L, np.nan), np.zeros(L), np.where(rng.random(L) < 0.01, np.inf, 0.0)]
    a = np.stack(rows)
    a[1, 5] = np.nan  # one NaN: row NaN, NaN ranked last
    x = to_gpu(a, dtype)
    for k in (0, 1, 2, L - 1, L):
        for log in (False, True):
            check(x, k, log=log, algorithm=algorithm)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_radix_block_lists(dtype):
    """topk_radix (lists of KP >= 128, float compute) on many rows (one block
    a row) and few long rows (split): rows of every style, ascending rows
    (every element a candidate: a prune every few batches), ties broken in
    the index digits, NaN / -inf / all -inf rows, k at the KP edges and
    misaligned rows, every algorithm."""
    dev = _device()
    th = _dispatch.topk_thresholds(dev)
    rng = np.random.default_rng(21)
    R, L = th["split_rows"] + 3, 6000
    styles = ["normal", "ties", "sorted", "wide", "specials", "neginf"]
    a = np.concatenate([make_data(rng, (R // len(styles) + 1, L + 1), s) for s in styles])[:R]
    a[5, 17] = np.nan
    a[6] = -np.inf
    a[7] = np.sort(a[7])[::-1]  # descending: candidates only in the first batch
    x = to_gpu(a, dtype)
    for k in (127, 128, 129, 256, 1000, 1024):
        p = _dispatch.plan_topk(R, L, k, dtype, dtype, dev)
        assert p.regime == "block" and p.kernel.startswith("topk_radix<"), p
        check(x[:, :L], k, log=k == 1000)
    check(x[:, 1:], 700)  # rows start mid-vector
    for algo in ("safe", "unfused"):
        check(x[:, :L], 300, algorithm=algo)
    few = to_gpu(np.concatenate([make_data(rng, (1, 200000), s) for s in ("normal", "sorted", "ties")]), dtype)
    p = _dispatch.plan_topk(3, 200000, 1024, dtype, dtype, dev)
    assert p.regime == "split" and p.kernel.startswith("topk_radix<"), p
    for k in (129, 1024):
        check(few, k)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64"])
def test_k1_running_best(dtype):
    """k = 1 in topk_stream keeps a running best a thread (no lists): rows in
    every order, ties, NaN and -inf rows, misaligned rows, every algorithm."""
    dev = _device()
    th = _dispatch.topk_thresholds(dev)
    rng = np.random.default_rng(31)
    R, L = th["split_rows"] + 1, 3001
    styles = ["normal", "ties", "sorted", "specials", "neginf"]
    a = np.concatenate([make_data(rng, (R // len(styles) + 1, L + 1), s) for s in styles])[:R]
    a[3] = -np.sort(a[3])  # descending
    a[4] = np.nan
    a[5, 100] = np.nan
    x = to_gpu(a, dtype)
    for algo in ALGOS:
        p = _dispatch.plan_topk(R, L, 1, dtype, dtype, dev, algo)
        if algo != "unfused":
            assert p.kernel.startswith("topk_stream<"), p
        check(x[:, :L], 1, algorithm=algo, log=algo == "safe")
    check(x[:, 1:], 1)


@pytest.mark.gpu
def test_long_rows_and_batch_invariance():
    rng = np.random.default_rng(3)
    a = make_data(rng, (3, 262144), "normal")
    x = to_gpu(a, "float32")
    for k in (1, 50, 1024):
        res = check(x, k)
        one = cusoftmax.softmax_topk(x[1:2], k)  # a split plan: same answer
        np.testing.assert_array_equal(one.indices.get()[0], res.indices.get()[1])
    big = to_gpu(make_data(rng, (300, 5000), "ties"), "float16")
    check(big, 100, log=True)
    check(big, 2000)  # sort path


@pytest.mark.gpu
def test_dtype_and_inputs(gpu):
    cp = gpu
    xi = cp.asarray(np.random.default_rng(0).integers(-5, 5, (4, 50)))
    check(xi, 7)
    x = to_gpu(np.random.default_rng(1).standard_normal((4, 50)), "float16")
    check(x, 7, dtype="float64")
    check(x, 7, dtype=cp.float32, log=True)
    v, i = check(to_gpu(np.asarray(2.0), "float32"), 1, axis=None)  # 0-d, flattened
    assert v.shape == (1,) and int(i[0]) == 0
    e = cusoftmax.softmax_topk(cp.zeros((0, 5), cp.float32), 3)
    assert e.values.shape == (0, 3) and e.indices.shape == (0, 3)
    e = cusoftmax.softmax_topk(cp.zeros((4, 0), cp.float32), 0)
    assert e.values.shape == (4, 0)


@pytest.mark.gpu
def test_argument_errors(gpu):
    cp = gpu
    x = cp.zeros((3, 10), cp.float32)
    with pytest.raises(ValueError, match=r"0 <= k <= 10"):
        cusoftmax.softmax_topk(x, 11)
    with pytest.raises(ValueError, match=r"0 <= k <= 3"):
        cusoftmax.softmax_topk(x, -1, axis=0)
    with pytest.raises(TypeError, match="bool"):
        cusoftmax.softmax_topk(x, True)
    with pytest.raises(TypeError, match="integer"):
        cusoftmax.softmax_topk(x, 2.0)
    with pytest.raises(ValueError, match="algorithm"):
        cusoftmax.softmax_topk(x, 2, algorithm="fast")
    with pytest.raises(TypeError):
        cusoftmax.softmax_topk(x, 2, axis=(0, 1))
    with pytest.raises(TypeError):
        cusoftmax.softmax_topk(np.zeros((3, 10)), 2)
    with pytest.raises(TypeError):
        cusoftmax.softmax_topk(x, 2, dtype=cp.int32)
    with pytest.raises(TypeError):
        cusoftmax.softmax_topk(x.astype(cp.bool_), 2)
