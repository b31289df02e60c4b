"""Launch plans of the strided-axis (cols) layout, without a GPU: every plan
respects CUDA's and the kernels' limits on H100 and A100, the layouts the
benchmark times take the one-read kernels, and an axis too long for one read
over too few tiles goes through the transposing copy."""
import itertools

import numpy as np
import pytest

from cusoftmax import _dispatch
from cusoftmax._dispatch import DeviceInfo

DEVS = [DeviceInfo(132, 90), DeviceInfo(108, 80), DeviceInfo(46, 86)]
DTYPES = ("float16", "bfloat16", "float32", "float64")


def _isz(d):
    return 2 if d == "bfloat16" else np.dtype(d).itemsize


def _args(p):
    return p.kernel.rstrip(">").split("<", 1)[1].split(", ")


@pytest.mark.parametrize("dev", DEVS, ids=["H100", "A100", "sm86"])
def test_cols_plans_within_limits(dev):
    known = {k for _, k in _dispatch.all_forward_kernels(dev)}
    Ls = (1, 2, 17, 512, 1000, 2048, 2049, 4096, 7000, 8192, 30000, 10 ** 6)
    Is = (1, 3, 8, 33, 64, 1000, 4096)
    for tin, tout in itertools.product(DTYPES, DTYPES):
        for O, L, I, vec in itertools.product((1, 5, 300, 3000), Ls, Is, (1, 2, 4, 8)):
            p = _dispatch.plan_cols(O, L, I, tin, tout, False, dev, vec)
            ctx = (tin, tout, O, L, I, vec, p)
            assert all(k in known for k in p.kernels()), ctx
            if p.fallback is not None and not p.sync:  # clusters of 16 (COLS_CL16_*), then their fallback
                v, th, nr, c, minb = (int(a) for a in _args(p)[3:8])
                tx, isz = p.extra[0], _isz(tin)
                assert dev.cc >= 90 and tin == tout and isz == 2 and c == 16 and th == 256, ctx
                assert O * L * I * isz <= _dispatch.COLS_CL16_MAX_BYTES, ctx
                assert minb == _dispatch.COLS_CL_MINB[nr] and p.smem == 0, ctx
                ltx = tx  # the lanes the NR is counted for
                c16 = _dispatch._choose_cols_cl16(O, L, I, tin, tout, False, dev, vec)
                lanes = _dispatch._choose_cols_cl16_lanes(O, L, I, tin, tout, False, dev, vec, c16)
                if lanes is not None and (lanes.kernel, lanes.grid) == (p.kernel, p.grid):  # 16 lanes (COLS_CL16_LANES)
                    assert _dispatch.COLS_CL16_LANES_MIN_L <= L <= _dispatch.COLS_CL16_LANES_MAX_L, ctx
                    assert v in (1, 2, 4) and v <= vec and (nr < 16 or v <= 2), ctx
                    assert 16 * O * -(-I // (16 * v)) <= 2 * dev.sm_count, ctx
                    ltx = _dispatch.COLS_CL16_LANES_TX  # (narrower rows: fewer lanes, the same NR)
                else:
                    assert _dispatch.COLS_CL16_MIN_L <= L <= _dispatch.COLS_CL16_MAX_L, ctx
                    assert vec * isz >= 8 and v in (vec // 2, vec), ctx
                tiles = O * -(-I // (tx * v))
                assert p.grid == (16, tiles) and p.extra == (tx, 16, tiles, nr), ctx
                assert L <= 16 * (th // ltx) * nr and (nr == 4 or L > 16 * (th // ltx) * nr // 2), ctx
                assert p.fallback == _dispatch._plan_cols_base(O, L, I, tin, tout, False, dev, vec), ctx
                p = p.fallback
            assert p.block[0] <= _dispatch.MAX_BLOCK_THREADS, ctx
            tx = p.extra[0]
            assert 1 <= tx <= 32 and p.block[0] % tx == 0, ctx
            if p.kernel.startswith("softmax_cols_sync"):  # one cooperative launch
                v, th, nr, minb, pf = _args(p)[3:8]
                v, th, nr, minb = int(v), int(th), int(nr), int(minb)
                narrow = v * _isz(tin) < _dispatch.VECTOR_BYTES  # (no cp.async prefetch)
                assert v <= vec and (pf == "false" if narrow else pf == "true"), ctx
                assert not narrow or (dev.cc >= 90 and tin == tout and nr == _dispatch.COLS_NARROW_SYNC_NR
                                      and v == 1), ctx
                assert p.sync and p.fallback is not None and p.fallback.pre_kernel, ctx
                splits, tiles = p.extra[1], p.extra[2]
                assert tiles == O * -(-I // (tx * v)) and th == p.block[0] == 256 and p.extra[3] == nr, ctx
                assert L >= th // tx * nr, ctx  # a block's rows all inside the axis at least once
                # the fewest splits NR allows, or (COLS_SYNC_BALANCE, 16-byte packs) up to
                # COLS_SYNC_BALANCE_SPLITS x that many in no more rounds; at most NR packs a thread
                ny = th // tx
                s0 = -(-L // (ny * nr))
                nrs = -(-(-(-L // ny)) // splits)
                assert nrs <= nr and L <= splits * ny * nrs and (splits - 1) * ny * nrs < L, ctx
                if narrow or not _dispatch.COLS_SYNC_BALANCE or splits == s0:
                    assert splits == s0, ctx
                else:
                    assert s0 <= splits <= _dispatch.COLS_SYNC_BALANCE_SPLITS * s0, ctx
                    assert splits == s0 or splits <= _dispatch.COLS_SYNC_BALANCE_MAX_SPLITS, ctx
                    cap = min(minb, (dev.max_smem + 1024) // (p.smem + (th // 32) * 256 * 8 + 1024)) * dev.sm_count
                    assert -(-tiles // (cap // splits)) <= -(-tiles // (cap // s0)), ctx
                # whole tiles a round, every block resident at once (registers and shared memory)
                assert p.smem == (0 if narrow else nr * th * 16), ctx
                per_sm = min(minb, (dev.max_smem + 1024) // (p.smem + (th // 32) * 256 * 8 + 1024))
                assert p.grid[0] % splits == 0 and p.grid[0] <= min(tiles * splits, per_sm * dev.sm_count), ctx
                assert splits <= _dispatch.COLS_SYNC_MAX_SPLITS, ctx
                assert p.ws_elems == 2 * tiles * splits * tx * v, ctx
                assert not _dispatch.cols_prefers_copy(p, O, L, I, dev), ctx
                continue
            if p.kernel.startswith("softmax_cols_cl"):  # a cluster a tile (sm_90)
                v, th, nr, c, minb = (int(a) for a in _args(p)[3:8])
                assert dev.cc >= 90 and tin == tout and tin in _dispatch.COLS_CL_DTYPES, ctx
                # 16-byte packs or (aligned, at COLS_CL_HALF_NR) 8-byte ones; narrow (the widest vec
                # allows is narrower): 8-byte 16-bit packs or scalars; 4-byte packs on 8-lane tiles at
                # COLS_FILL4_NR (_cols_fill4: 16-bit where vec gives 8-byte packs, float32 where 16-byte)
                fill4 = (v * _isz(tin) == 4 and tx * 4 == _dispatch.COLS_FILL4_SEGMENT
                         and (nr == _dispatch.COLS_FILL4_NR or (tin in _dispatch.COLS_FILL4_LONG_DTYPES
                                                                and nr == _dispatch.COLS_FILL4_LONG_NR))
                         and (vec * 2 == 8 if _isz(tin) == 2 else vec * 4 >= 16))
                assert v <= vec and (fill4 or (
                    v * _isz(tin) in (_dispatch.VECTOR_BYTES, _dispatch.VECTOR_BYTES // 2) if vec * _isz(tin) >= 16
                    else v == 1 or (_isz(tin) == 2 and v * 2 == 8))), ctx
                assert fill4 or v * _isz(tin) == _dispatch.VECTOR_BYTES or vec * _isz(tin) < 16 or (
                    nr == _dispatch.COLS_CL_HALF_NR and c <= _dispatch.COLS_CL_HALF_MAX_CLUSTER[_isz(tin)]), ctx
                assert tx * v <= 64 and th == p.block[0] == 256 and p.smem == 0, ctx  # COLS_CL_W_MAX
                assert minb == _dispatch.COLS_NARROW_MINB.get((tin, v, nr), _dispatch.COLS_CL_MINB[nr]), ctx
                assert nr % 4 == 0, ctx
                tiles = O * -(-I // (tx * v))
                assert p.grid == (c, tiles) and tiles <= 65535 and p.extra == (tx, c, tiles, nr), ctx
                rows = th // tx * nr  # a block's rows: the smallest cluster of them covering L
                sizes = _dispatch.COLS_NARROW_CLUSTERS if vec * _isz(tin) < 16 or fill4 else _dispatch.COLS_CL_CLUSTERS
                smaller = [s for s in sizes if s < c]
                assert c in sizes and L <= c * rows and (c == 1 or L > smaller[-1] * rows), ctx
                assert not _dispatch.cols_prefers_copy(p, O, L, I, dev), ctx  # never through the copy
                continue
            if p.pre_kernel:  # split stream: grid (tiles, splits), splits cover L exactly once
                assert p.kernel.startswith("softmax_cols_split_finish"), ctx
                assert p.pre_kernel.startswith("softmax_cols_split_partial"), ctx
                v, th = (int(a) for a in _args(p)[3:5])
                assert v <= vec and vec % v == 0, ctx  # never wider than the layout allows
                assert v * max(_isz(tin), _isz(tout)) <= _dispatch.VECTOR_BYTES, ctx
                assert tx * v <= 256 and th == p.block[0] == 256, ctx  # COLS_SPLIT_W_MAX
                tiles, splits = p.grid
                lps = p.extra[1]
                assert p.pre_grid == p.grid and p.extra[2] == tiles, ctx
                assert tiles == O * -(-I // (tx * v)) and splits <= 65535, ctx
                assert (splits - 1) * lps < L <= splits * lps, ctx
                # partials and per-tile totals, (m, d) each
                assert p.ws_elems == 2 * tiles * (splits + 1) * tx * v, ctx
                assert not _dispatch.cols_prefers_copy(p, O, L, I, dev), ctx
                continue
            if p.kernel.startswith("softmax_cols_staged"):
                v, th, st, c = (int(a) for a in _args(p)[3:])
                assert v <= vec and vec % v == 0, ctx  # never wider than the layout allows
                assert v * max(_isz(tin), _isz(tout)) <= _dispatch.VECTOR_BYTES, ctx
                assert tx * v <= 64, ctx  # COLS_W_MAX in softmax.cu
                assert st in (0, 2) and (st == 0 or v * _isz(tin) == 16), ctx  # cp.async: 16-byte packs
                assert c == 1 or (dev.has_clusters and p.cluster == c and p.grid[0] % c == 0), ctx
                assert p.smem == max(st, 1) * -(-L // c) * tx * v * _isz(tin) <= dev.max_smem, ctx
                tiles = O * -(-I // (tx * v)) * c
            else:
                assert p.smem == 0, ctx
                tiles = O * -(-I // tx)
            assert 1 <= p.grid[0] <= tiles, ctx


def test_benchmark_layouts_take_strided_kernels():
    """(2048, 4096) reduced over axis 0 and its Fortran-order transpose are
    both (O=1, L=2048, I=4096) (and (1, 4096, 2048) for the transposed
    benchmark case): both dtypes take the one-launch sync kernel (one
    read), but float32 (2048, 4096) the cluster kernel with 8-byte packs at
    NR 16 in clusters of 8 (COLS_CL_HALF_NR); without 16-byte packs, on sm_90 the narrow-pack rule's cluster
    kernel (scalars / 8-byte 16-bit packs), before it float32 takes the
    staged kernel and bfloat16 the split stream; never the copy."""
    h100, a100 = DEVS[0], DEVS[1]
    for L, I in ((2048, 4096), (4096, 2048)):
        for dt, vec, kern, dev in (("float32", 4, "softmax_cols_cl<float, float, false, 2, 256, 16, 8, 1, 1>"
                                    if L == 2048 else "softmax_cols_sync", h100),
                                   ("bfloat16", 8, "softmax_cols_sync", h100),
                                   ("float32", 2, "softmax_cols_cl<float, float, false, 1," if L == 2048
                                    else "softmax_cols_split_finish", h100),  # (4096 rows: no cluster of 8)
                                   ("bfloat16", 4, "softmax_cols_cl<bf16_t, bf16_t, false, 4,", h100),
                                   ("float32", 2, "softmax_cols_staged", a100),
                                   ("bfloat16", 4, "softmax_cols_split_finish", a100)):
            p = _dispatch.plan_cols(1, L, I, dt, dt, False, dev, vec)
            assert p.kernel.startswith(kern), (dt, vec, L, I, p)
            assert not _dispatch.cols_prefers_copy(p, 1, L, I, dev)


def test_long_axis_over_few_tiles_splits_the_axis():
    """A long axis over a narrow inner extent (too few tiles to fill the GPU)
    is split over blocks instead of going through the transposing copy: in
    one launch over at most COLS_SYNC_MAX_SPLITS blocks a tile, else by the
    split stream."""
    dev = DEVS[0]
    for L, I, kern in ((10 ** 6, 8, "softmax_cols_split_finish"), (65536, 64, "softmax_cols_sync"),
                       (65536, 128, "softmax_cols_sync"), (1 << 20, 64, "softmax_cols_split_finish")):
        p = _dispatch.plan_cols(1, L, I, "float32", "float32", False, dev, 4)
        assert p.kernel.startswith(kern), p
        assert (p.grid[0] if p.sync else p.grid[0] * p.grid[1]) >= dev.sm_count, p
        assert not _dispatch.cols_prefers_copy(p, 1, L, I, dev)
    p = _dispatch.plan_cols(16, 50, 33, "float32", "float32", False, dev, 1)
    assert not _dispatch.cols_prefers_copy(p, 16, 50, 33, dev)
    # float32 axes of COLS_SPLIT_BELOW_L .. COLS_SPLIT_FROM_L without 16-byte packs stay staged
    # (before sm_90: the narrow-pack rule takes them on sm_90)
    p = _dispatch.plan_cols(1, 2048, 4096, "float32", "float32", False, DEVS[1], 2)
    assert p.kernel.startswith("softmax_cols_staged"), p


def test_cols_sync_rules():
    """Where plan_cols takes softmax_cols_sync on the H100 (the measured
    rules: axes of at least a block's rows, at most COLS_SYNC_MAX_SPLITS (256)
    blocks a tile, at most COLS_SYNC_MAX_ROUNDS rounds), the smallest NR whose
    grid fits at once among those within COLS_SYNC_NR_MAX_SPLITS, and the
    copy-free split stream elsewhere."""
    dev = DEVS[0]
    sync = lambda O, L, I, dt: _dispatch.plan_cols(O, L, I, dt, dt, False, dev,  # noqa: E731
                                                   16 // _isz(dt)).kernel.startswith("softmax_cols_sync")
    for shape in ((1, 2048, 4096), (1, 16384, 512), (1, 1024, 8192), (8, 4096, 256)):
        assert sync(*shape, "bfloat16") and sync(*shape, "float16"), shape
    for shape in ((1, 16384, 512), (8, 4096, 256)):  # (float32 (2048, 4096), (1024, 8192), (64, 512,
        assert sync(*shape, "float32"), shape        # 256): 8-byte packs in clusters, test_cols_cl_rules)
    for dt in ("float32", "bfloat16", "float16"):  # in rounds (8 and 16)
        assert sync(1, 8192, 8192, dt) and sync(1, 16384, 4096, dt), dt
    for shape in ((1, 65536, 128), (1, 32768, 256), (1, 131072, 64)):  # 64-256 blocks a tile
        for dt in ("float32", "bfloat16", "float16"):
            assert sync(*shape, dt), (shape, dt)
    for shape in ((1, 262144, 64), (4, 262144, 64)):  # > 256 blocks a tile
        assert not sync(*shape, "float32") and not sync(*shape, "bfloat16"), shape
    # NR 4 would split (32768, 64) over 256 blocks (> COLS_SYNC_NR_MAX_SPLITS[4]): NR 16, 64 blocks
    # (no more when balanced: COLS_SYNC_BALANCE_MAX_SPLITS)
    p = _dispatch.plan_cols(1, 32768, 64, "bfloat16", "bfloat16", False, dev, 8)
    assert ", 16, 2, true>" in p.kernel and p.extra[1] == 64, p
    assert not sync(1, 256, 32768, "bfloat16")  # a block's 512 rows over a 256-long axis
    assert not sync(1, 2048, 4096, "float64")  # double arithmetic
    p = _dispatch._plan_cols_sync(1, 1000, 1000, "bfloat16", "bfloat16", False, dev, 8)
    assert ", 4, 3, true>" in p.kernel and p.grid == (128,), p  # NR 4 fits at once (one round: unbalanced)
    # in rounds: balanced, up to twice the splits in no more rounds (47 tiles x 6 -> 11 splits, 2 rounds)
    p = _dispatch._plan_cols_sync(1, 3000, 1500, "float32", "float32", False, dev, 4)
    assert ", 16, 2, true>" in p.kernel and p.extra[:3] == (8, 11 if _dispatch.COLS_SYNC_BALANCE else 6, 47), p
    p = _dispatch._plan_cols_sync(1, 2048, 4096, "float32", "float32", False, dev, 4)
    assert ", 16, 2, true>" in p.kernel and p.grid == (264,) and p.extra == (8, 4, 128, 16), p
    for O, L, I in ((1, 700, 136), (3, 1500, 264), (2, 4096, 40), (1, 5000, 3000)):  # the kernel's
        for dt in ("float16", "bfloat16", "float32"):  # tx / ly are shifts: TX a power of two
            p = _dispatch._plan_cols_sync(O, L, I, dt, dt, False, dev, 16 // _isz(dt))
            assert p is not None and p.extra[0] & (p.extra[0] - 1) == 0, (O, L, I, dt, p)
    for dt in ("float16", "bfloat16"):  # 4 rounds at NR 4, one at NR 16
        p = _dispatch.plan_cols(1, 2048, 4096, dt, dt, False, dev, 8)
        assert ", 16, 2, true>" in p.kernel and p.grid == (256,), p


def test_rowsync_plans_carry_a_split_fallback():
    """Every rowsync plan names the two-kernel split it falls back to when a
    cooperative launch is refused, for the same rows; its kernels are in
    the plan's kernel list (so the compile check builds them)."""
    dev = DeviceInfo(132, 90)
    seen = 0
    for dt in ("float16", "bfloat16", "float32", "float64"):
        for log in (False, True):
            for R in (1, 2, 8, 33):
                for L in (10 ** 4, 10 ** 5, 10 ** 6):
                    p = _dispatch.plan_rows(R, L, dt, dt, log, dev)
                    if p.regime != "rowsync":
                        assert p.fallback is None
                        continue
                    seen += 1
                    fb = p.fallback
                    assert p.sync and fb.regime == "split" and fb.grid[1] == R == p.grid[1]
                    assert p.grid[0] * p.grid[1] <= dev.sm_count
                    assert set(fb.kernels()) <= set(p.kernels())
    assert seen > 20


def test_rowsync_counter_region_is_fixed():
    """softmax_rowsync's counters sit in a region of fixed size, the same in
    the kernel and the launcher (softmax.cu's ROWSYNC_MAX_ROWS ==
    _dispatch.ROWSYNC_MAX_ROWS), and no plan takes more rows than it holds:
    a region sized by the launch's rows let partials of an earlier launch
    lie under a later launch's counters."""
    import re
    from cusoftmax._loader import kernel_dir
    with open(f"{kernel_dir()}/softmax.cu") as f:
        src = f.read()
    m = re.search(r"^#define ROWSYNC_MAX_ROWS (\d+)$", src, re.M)
    assert m and int(m.group(1)) == _dispatch.ROWSYNC_MAX_ROWS
    assert "ROWSYNC_COUNTER_BYTES) + 2 * (r * n)" in src  # the partials start after the whole region
    for sms in (132, 4 * _dispatch.ROWSYNC_MAX_ROWS + 40):  # (a GPU with more SMs than the region's rows x 4)
        dev = DeviceInfo(sms, 90)
        for R in (1, sms // 4 - 1, sms // 4, _dispatch.ROWSYNC_MAX_ROWS, _dispatch.ROWSYNC_MAX_ROWS + 1):
            p = _dispatch.plan_rows(R, 10 ** 5, "float32", "float32", False, dev)
            assert p.regime != "rowsync" or R <= _dispatch.ROWSYNC_MAX_ROWS, (sms, R, p)


def test_row_plans_have_a_grid_on_tiny_gpus():
    """A GPU with fewer SMs than a cluster (the tests' fake 2-SM device) still
    gets at least one cluster of blocks: a grid of 0 is an invalid launch
    (found by test_rows_at_thresholds: float64 31 x 32770 on 2 SMs)."""
    for sms in (1, 2, 3, 5):
        dev = DeviceInfo(sms, 90)
        for dt in DTYPES:
            for R, L in ((31, 32770), (3, 100000), (200, 60000), (1, 10 ** 6)):
                for log in (False, True):
                    p = _dispatch.plan_rows(R, L, dt, dt, log, dev)
                    assert all(g >= 1 for g in p.grid), (sms, dt, R, L, p)
                    assert p.grid[0] % p.cluster == 0, (sms, dt, R, L, p)


def test_cols_narrow_rules():
    """Packs narrower than 16 bytes (COLS_NARROW_NR; sm_90, same-dtype
    float16 / bfloat16 / float32): softmax_cols_cl with 16-bit 8-byte packs,
    else scalars, NR from 32 down until the grid has 1.25 x SMs blocks;
    softmax_cols_sync at NR 32 without prefetch where no cluster of 8 holds
    the axis and two rounds do; else the split stream. Not before sm_90, for
    mixed dtypes or float64 (as before: staged or split)."""
    h100, a100 = DEVS[0], DEVS[1]

    def plan(O, L, I, dt, dev=h100, out=None):
        isz = _isz(dt)
        vec = 16 // isz
        while vec > 1 and I % vec:
            vec //= 2
        return _dispatch.plan_cols(O, L, I, dt, out or dt, False, dev, vec)
    for dt in ("float32", "bfloat16", "float16"):
        T = _dispatch.CTYPE[dt]
        p = plan(1, 1000, 1001, dt)  # scalars, NR 16, clusters of 8 (NR 32: 128 blocks)
        assert p.kernel == f"softmax_cols_cl<{T}, {T}, false, 1, 256, 16, 8, 1, 1>" and p.grid == (8, 32), p
        p = plan(1, 1000, 1002, dt)  # 4-byte 16-bit / 8-byte float32 packs: scalars
        assert p.kernel == f"softmax_cols_cl<{T}, {T}, false, 1, 256, 16, 8, 1, 1>", p
        mb = 2 if dt == "float32" else 3  # (COLS_NARROW_MINB: 16-bit scalars at NR 32, 3 blocks an SM)
        p = plan(1, 333, 3001, dt)  # NR 32 in clusters of 2: 188 blocks
        assert p.kernel == f"softmax_cols_cl<{T}, {T}, false, 1, 256, 32, 2, {mb}, 1>" and p.grid == (2, 94), p
        p = plan(1, 4000, 1001, dt)  # no cluster of 8 holds 4000 rows: sync, NR 32, one round
        assert p.kernel == f"softmax_cols_sync<{T}, {T}, false, 1, 256, 32, 2, false>" and p.smem == 0, p
        assert p.extra[1:3] == (16, 32) and p.grid == (256,), p
        p = plan(1, 8000, 1001, dt)  # sync would take 4 rounds: the split stream
        assert p.kernel.startswith("softmax_cols_split_finish") and ", 1, 256, 8>" in p.kernel, p
        for dev in (a100,):
            assert not plan(1, 1000, 1001, dt, dev=dev).kernel.startswith(("softmax_cols_cl", "softmax_cols_sync"))
    for dt in ("bfloat16", "float16"):  # 8-byte packs, NR 8 (chosen in clusters of 8: 192 blocks) in clusters of 6
        T = _dispatch.CTYPE[dt]
        p = plan(1, 700, 1500, dt)
        assert p.kernel == f"softmax_cols_cl<{T}, {T}, false, 4, 256, 8, 6, 2, 1>" and p.grid == (6, 24), p
    for dt in ("float32", "bfloat16", "float16"):  # COLS_NARROW_CLUSTERS: the smallest cluster that holds the axis
        T = _dispatch.CTYPE[dt]
        for L, I, c, tiles in ((1500, 1001, 6, 32), (700, 2001, 3, 63), (2000, 501, 8, 16), (1000, 3001, 4, 94)):
            p = plan(1, L, I, dt)
            if dt == "float32" and I == 3001:  # (float32: the skewed sync plan)
                continue
            mb = 2 if dt == "float32" else 3
            assert p.kernel == f"softmax_cols_cl<{T}, {T}, false, 1, 256, 32, {c}, {mb}, 1>", (L, I, p)
            assert p.grid == (c, tiles), (L, I, p)
    assert plan(1, 700, 1502, "float32").kernel.startswith("softmax_cols_cl<float, float, false, 1,")
    for args in ((1, 1000, 1001, "bfloat16", h100, "float32"), (1, 1000, 1001, "float64")):
        assert not plan(*args).kernel.startswith(("softmax_cols_cl", "softmax_cols_sync")), args


@pytest.mark.usefixtures("no_cl16")
def test_cols_cl_rules(monkeypatch):
    """Where plan_cols takes softmax_cols_cl (sm_90: a cluster a tile, rows in
    registers, partials through distributed shared memory): same-dtype
    float16 / bfloat16 / float32 arrays of at most COLS_CL_MAX_BYTES, and
    16-bit tiles (float32: of axes shorter than a sync block's 512 rows)
    within a cluster of COLS_CL_16_MAX_CLUSTER blocks at NR = COLS_CL_16_NR;
    its NR the smallest whose cluster has at most 8 blocks. Before those,
    8-byte packs at COLS_CL_HALF_NR: float32 (log_softmax: clusters of at
    most 4) and 16-bit arrays over COLS_CL_MAX_BYTES (clusters of 4 up to
    8 MiB, else of 2) over at least 0.75 x SMs blocks.
    Never before sm_90, for float64 or for mixed dtypes; without 16-byte
    packs, the narrow-pack rule's plans (test_cols_narrow_rules). (With
    _cols_fill4, which follows these rules, off: test_cols_fill4_rules.)"""
    monkeypatch.setattr(_dispatch, "COLS_FILL4", False)
    h100, a100 = DEVS[0], DEVS[1]

    def plan(O, L, I, dt, dev=h100, vec=None, out=None):
        return _dispatch.plan_cols(O, L, I, dt, out or dt, False, dev, vec or 16 // _isz(dt))

    def cl(*a, **k):
        return plan(*a, **k).kernel.startswith("softmax_cols_cl")
    for shape in ((1, 512, 512), (1, 1000, 1000), (1, 200, 4096)):
        for dt in ("float32", "bfloat16", "float16"):
            assert cl(*shape, dt), (shape, dt)
            assert not cl(*shape, dt, dev=a100) and not cl(*shape, dt, dev=a100, vec=2), (shape, dt)
            assert ", false, 1, 256, " in plan(*shape, dt, vec=2).kernel, (shape, dt)  # scalars
        assert not cl(*shape, "float64") and not cl(*shape, "bfloat16", out="float32"), shape
    assert cl(1, 2048, 1024, "bfloat16")  # 4 MiB: 16-byte packs
    half = lambda *a, **k: ", 256, 16, " in plan(*a, **k).kernel and (  # noqa: E731
        f", {8 // _isz(a[3])}, 256, 16, " in plan(*a, **k).kernel)
    p = plan(1, 2048, 1024, "float32")  # 8 MiB: 8-byte packs, NR 16, a cluster of 8
    assert p.kernel.endswith(", 2, 256, 16, 8, 1, 1>") and p.grid == (8, 32) and p.extra == (16, 8, 32, 16), p
    lg = _dispatch.plan_cols(1, 2048, 1024, "float32", "float32", True, h100, 4)  # log_softmax: clusters <= 4
    assert lg.kernel.startswith("softmax_cols_sync"), lg
    assert half(1, 1000, 3000, "bfloat16") and half(1, 1000, 3000, "float16")  # 6 MiB, a cluster of 4
    assert half(1, 700, 1500, "float32") and half(1, 1000, 1000, "float32")
    for shape in ((1, 512, 16384), (64, 512, 256)):  # 16 / 32 MiB: 8-byte packs, NR 16 in a cluster of 2
        for dt in ("bfloat16", "float16", "float32"):
            assert cl(*shape, dt) and plan(*shape, dt).kernel.endswith(", 16, 2, 1, 1>"), (shape, dt)
            assert half(*shape, dt), (shape, dt)
    assert not cl(1, 1024, 8192, "bfloat16")  # NR 8 needs a cluster of 4: the sync kernel
    assert not cl(1, 1024, 8192, "float16") and not cl(8, 4096, 256, "float16")  # as bfloat16
    p = plan(1, 512, 512, "float32")
    assert p.kernel.endswith(", 4, 256, 4, 4, 3, 1>") and p.grid == (4, 16) and p.extra == (8, 4, 16, 4), p
    p = plan(1, 2048, 1024, "bfloat16")  # NR 4 would need a cluster of 16: NR 8, 8 blocks
    assert p.kernel.endswith(", 8, 256, 8, 8, 2, 1>") and p.grid == (8, 16), p
    p = plan(1, 1000, 1000, "bfloat16")  # NR 4 in a cluster of 8
    assert p.kernel.endswith(", 8, 256, 4, 8, 3, 1>") and p.grid == (8, 16), p
    for L, c in ((256, 1), (300, 2), (600, 4)):  # float32 (32 MiB and more): 8-byte packs, NR 16
        p = plan(1, L, 32768, "float32")
        assert p.kernel.endswith(f", 2, 256, 16, {c}, 1, 1>") and p.grid == (c, 1024), (L, p)
    p = plan(1, 300, 32768, "float32", vec=4)  # without the half packs (COLS_CL_16_NR in a cluster of 2)
    assert _dispatch._plan_cols_cl(1, 300, 32768, "float32", "float32", False, h100, 4,
                                   _dispatch.COLS_CL_16_NR).kernel.endswith(", 4, 256, 8, 2, 2, 1>")
    p = plan(3, 300, 20, "float32")  # a tile of 32 columns over 20, 128 rows a block: a cluster of 4
    assert p.kernel.startswith("softmax_cols_cl") and p.grid == (4, 3) and p.extra == (8, 4, 3, 4), p


def test_cols_slab_rule():
    """_choose_cols_slab: on sm_90, dense same-dtype float16 / bfloat16 /
    float32 slabs (O = 1) of at least COLS_SLAB_MIN_L rows whose base plan
    streams twice (split stream) or holds x in COLS_SLAB_MIN_SYNC_ROUNDS or
    more sync rounds take the whole-slab kernel, with the base plan as its
    fallback; its layout fits (a period that is a multiple of lcm(I, pack) and
    of the pack, at most COLS_SLAB_SLOTS elements and one thread a pack; the
    slab, totals and period partials within shared memory). Nothing else
    takes it: non-dense, O > 1, another output dtype, float64, sm_80, short
    axes, cluster / one-round sync plans."""
    import math

    h100, a100 = DeviceInfo(132, 90), DeviceInfo(108, 80)

    def vec_of(I, dt):
        v = 16 // _isz(dt)
        while I % v:
            v //= 2
        return v

    taken = []
    for dt in ("float16", "bfloat16", "float32", "float64"):
        for L, I in itertools.product((1000, 4000, 6000, 6999, 7000, 8000, 12000, 16000, 16002),
                                      (100, 200, 256, 300, 384, 500, 512, 768, 1000, 1024, 1200, 1500, 1600,
                                       2500, 3000)):
            v = vec_of(I, dt)
            p = _dispatch.plan_cols(1, L, I, dt, dt, False, h100, v, True, True)
            base = _dispatch._plan_cols_base(1, L, I, dt, dt, False, h100, v, True, True)
            ctx = (dt, L, I, p.kernel, base.kernel)
            if not p.kernel.startswith("softmax_cols_slab"):
                continue
            taken.append((dt, L, I))
            assert dt in _dispatch.COLS_SLAB_DTYPES and L >= _dispatch.COLS_SLAB_MIN_L, ctx
            assert p.fallback == base and p.sync and p.grid == (h100.sm_count,), ctx
            name = base.kernel.split("<")[0]
            assert name == "softmax_cols_split_finish" or (
                name == "softmax_cols_sync" and _dispatch._sync_rounds(base) >= _dispatch.COLS_SLAB_MIN_SYNC_ROUNDS), ctx
            pack = 16 // _isz(dt)
            ppb, ps = p.extra
            S = ps * pack
            assert (L * I) % pack == 0 and S % (I * pack // math.gcd(I, pack)) == 0, ctx
            assert S <= _dispatch.COLS_SLAB_SLOTS and ps <= p.block[0] == _dispatch.COLS_SLAB_THREADS, ctx
            assert ppb * h100.sm_count * pack >= L * I > (ppb - 1) * h100.sm_count * pack, ctx
            assert p.smem == ppb * 16 + 8 * (I + S) <= h100.max_smem, ctx
            assert p.ws_elems == 2 * (I * h100.sm_count + I), ctx
            # the same problem any other way: another plan
            for q in (_dispatch.plan_cols(1, L, I, dt, dt, False, h100, v, False, True),  # not dense
                      _dispatch.plan_cols(2, L, I, dt, dt, False, h100, v, True, True),  # O > 1
                      _dispatch.plan_cols(1, L, I, dt, "float32" if dt != "float32" else "float16", False,
                                          h100, v, True, True),
                      _dispatch.plan_cols(1, L, I, dt, dt, False, a100, v, True, True)):
                assert not q.kernel.startswith("softmax_cols_slab"), (ctx, q.kernel)
            assert _dispatch.plan_cols(1, L, I, dt, dt, True, h100, v, True, True).kernel == \
                p.kernel.replace("false>", "true>"), ctx  # log_softmax alike
    # the measured cases (bench/results/nvidia-h200/kernels/slab.txt) are in, shorter axes out
    for case in (("bfloat16", 16000, 300), ("float16", 16000, 500), ("bfloat16", 12000, 768),
                 ("float16", 8000, 1500), ("float32", 16000, 300)):
        assert case in taken, case
    for case in (("bfloat16", 4000, 3000), ("bfloat16", 6000, 1600), ("float32", 6999, 1000),
                 ("bfloat16", 16000, 200), ("bfloat16", 8000, 1024)):
        assert case not in taken, case
