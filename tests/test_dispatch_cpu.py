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
        for O, L, I, vec in itertools.product((1, 5, 300), Ls, Is, (1, 2, 4, 8)):
            p = _dispatch.plan_cols(O, L, I, tin, tout, False, dev, vec)
            ctx = (tin, tout, O, L, I, vec, p)
            assert all(k in known for k in p.kernels()), ctx
            assert p.block[0] <= _dispatch.MAX_BLOCK_THREADS, ctx
            tx = p.extra[0]
            assert 1 <= tx <= 32 and p.block[0] % tx == 0, ctx
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
                assert p.ws_elems * (8 if p.ws_dtype == "float64" else 4) >= \
                    8 * tiles * splits * tx * v // (2 if p.ws_dtype == "float32" else 1) + 4 * tiles, ctx
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
    benchmark case): float32 takes the staged kernel (one read), bfloat16
    the split stream (measured faster for 16-bit); never the copy."""
    dev = DEVS[0]
    for L, I in ((2048, 4096), (4096, 2048)):
        for dt, vec, kern in (("float32", 4, "softmax_cols_staged"),
                              ("bfloat16", 8, "softmax_cols_split_finish")):
            p = _dispatch.plan_cols(1, L, I, dt, dt, False, dev, vec)
            assert p.kernel.startswith(kern), p
            assert not _dispatch.cols_prefers_copy(p, 1, L, I, dev)


def test_long_axis_over_few_tiles_splits_the_axis():
    """A long axis over a narrow inner extent (too few tiles to fill the GPU)
    is split over blocks instead of going through the transposing copy."""
    dev = DEVS[0]
    for L, I in ((10 ** 6, 8), (65536, 64), (65536, 128)):
        p = _dispatch.plan_cols(1, L, I, "float32", "float32", False, dev, 4)
        assert p.kernel.startswith("softmax_cols_split_finish"), p
        assert p.grid[0] * p.grid[1] >= dev.sm_count, p
        assert not _dispatch.cols_prefers_copy(p, 1, L, I, dev)
    p = _dispatch.plan_cols(16, 50, 33, "float32", "float32", False, dev, 1)
    assert not _dispatch.cols_prefers_copy(p, 16, 50, 33, dev)
    # float32 axes of COLS_SPLIT_BELOW_L .. COLS_SPLIT_FROM_L stay staged
    p = _dispatch.plan_cols(1, 2048, 4096, "float32", "float32", False, dev, 4)
    assert p.kernel.startswith("softmax_cols_staged"), p


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
