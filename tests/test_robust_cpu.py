"""Robustness of the loader and launcher, without a GPU (monkeypatched CuPy):
an unusable kernel cache directory costs one warning, not an error; a CUDA
error raised by a launch comes back as a RuntimeError naming the operation,
the kernel and the problem size."""
import contextlib
import dataclasses
import functools
import itertools
import os
import warnings

import pytest

import cupy
from cusoftmax import _dispatch, _launch, _loader


class _FakeKernel:
    attributes = {}

    def __init__(self, name):
        self.name = name


class _FakeRawModule:
    """Stands in for cupy.RawModule: fails like an unwritable / corrupted
    cache unless CuPy's in-memory switch is on."""
    calls = []
    fail_with = PermissionError(13, "Permission denied", "/ro/kernel_cache/tmpabc")

    def __init__(self, code, options, name_expressions):
        in_mem = os.environ.get("CUPY_CACHE_IN_MEMORY") == "1"
        type(self).calls.append((name_expressions[0], in_mem))
        if not in_mem and self.fail_with is not None:
            raise self.fail_with
        self.names = name_expressions

    def get_function(self, name):
        return _FakeKernel(name)


@pytest.fixture
def fake_cupy(monkeypatch):
    monkeypatch.setattr(cupy, "RawModule", _FakeRawModule)
    monkeypatch.setattr(cupy.cuda, "Device", lambda i: contextlib.nullcontext())
    monkeypatch.setattr(_loader, "_kernels", {})
    monkeypatch.setattr(_loader, "_disk_cache_ok", True)
    monkeypatch.delenv("CUPY_CACHE_IN_MEMORY", raising=False)
    _FakeRawModule.calls = []
    _FakeRawModule.fail_with = PermissionError(13, "Permission denied", "/ro/kernel_cache/tmpabc")
    yield _FakeRawModule


@pytest.mark.parametrize("err", [
    PermissionError(13, "Permission denied"),            # read-only CUPY_CACHE_DIR
    IsADirectoryError(21, "Is a directory"),             # a cache entry that is not a file
    FileNotFoundError(2, "No such file or directory"),   # directory removed underneath
    RuntimeError("CUDA_ERROR_INVALID_IMAGE: device kernel image is invalid"),  # corrupted cubin
])
def test_unusable_cache_dir_warns_once_and_compiles_in_memory(fake_cupy, err):
    fake_cupy.fail_with = err
    with pytest.warns(RuntimeWarning, match="kernel cache") as rec:
        k1 = _loader.get_kernel("softmax.cu", "k<1>", 0)
    assert isinstance(k1, _FakeKernel) and k1.name == "k<1>"
    assert len(rec) == 1
    assert fake_cupy.calls == [("k<1>", False), ("k<1>", True)]
    assert "CUPY_CACHE_IN_MEMORY" not in os.environ, "the switch is restored after the compile"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no second warning
        k2 = _loader.get_kernel("softmax.cu", "k<2>", 0)
    assert k2.name == "k<2>"
    assert fake_cupy.calls[2:] == [("k<2>", True)], "later compiles go straight to memory"
    assert _loader.get_kernel("softmax.cu", "k<1>", 0) is k1


def test_working_cache_no_warning(fake_cupy):
    fake_cupy.fail_with = None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        k = _loader.get_kernel("softmax.cu", "k<3>", 0)
    assert k.name == "k<3>" and fake_cupy.calls == [("k<3>", False)]


def test_in_memory_switch_restored_to_previous_value(fake_cupy, monkeypatch):
    monkeypatch.setenv("CUPY_CACHE_IN_MEMORY", "0")
    with pytest.warns(RuntimeWarning):
        _loader.get_kernel("softmax.cu", "k<4>", 0)
    assert os.environ["CUPY_CACHE_IN_MEMORY"] == "0"


def test_compile_errors_are_not_swallowed(fake_cupy):
    from cupy.cuda.compiler import CompileException
    fake_cupy.fail_with = CompileException("error: bad template", "src", "name", ())
    with pytest.raises(CompileException):
        _loader.get_kernel("softmax.cu", "k<5>", 0)
    assert fake_cupy.calls == [("k<5>", False)], "a source error is not retried"
    assert _loader._disk_cache_ok


def test_error_not_caused_by_cache_is_reported(fake_cupy, monkeypatch):
    class AlwaysFails(_FakeRawModule):
        def __init__(self, code, options, name_expressions):
            raise MemoryError("out of memory")

    monkeypatch.setattr(cupy, "RawModule", AlwaysFails)
    with pytest.raises(MemoryError):
        _loader.get_kernel("softmax.cu", "k<6>", 0)
    assert _loader._disk_cache_ok, "the cache is not blamed when memory mode fails too"


_CL16_MAX_BYTES = _dispatch.COLS_CL16_MAX_BYTES  # (the default; the no_cl16 fixture patches it)


@functools.lru_cache(maxsize=None)
def _forward_names(dev):
    """The compile-check enumeration's kernel names on ``dev`` under the
    default switches (all_forward_kernels takes about half a minute; the
    rule tests call this before they patch any switch, the no_cl16
    fixture's aside)."""
    with pytest.MonkeyPatch.context() as m:
        m.setattr(_dispatch, "COLS_CL16_MAX_BYTES", _CL16_MAX_BYTES)
        return frozenset(k for _, k in _dispatch.all_forward_kernels(dev))


def _plan_cols_with(monkeypatch, name, value, *a):
    """plan_cols(*a) with the dispatcher's switch ``name`` set to ``value``
    for this call only."""
    with monkeypatch.context() as m:
        m.setattr(_dispatch, name, value)
        return _dispatch.plan_cols(*a)


# ----------------------------------------------------------------------------
# Launch errors
# ----------------------------------------------------------------------------
def _cuda_error():
    from cupy_backends.cuda.api.runtime import CUDARuntimeError
    return CUDARuntimeError(700)  # cudaErrorIllegalAddress


class _Raising:
    def __init__(self):
        self.calls = 0

    def __call__(self, grid, block, args, **kw):
        self.calls += 1
        raise _cuda_error()


@pytest.fixture
def no_compile(monkeypatch):
    monkeypatch.setattr(_launch, "get_kernel", lambda src, name, dev: _Raising())


@pytest.mark.parametrize("log,op", [(False, "cusoftmax.softmax"), (True, "cusoftmax.log_softmax")])
def test_launch_error_names_operation_and_shape(no_compile, log, op):
    plan = _dispatch.plan_rows(12, 345, "float32", "float32", log, _dispatch.DeviceInfo(132, 90))
    ln = _launch.Launch(plan, 0)
    with pytest.raises(RuntimeError) as ei:
        ln.rows(0, 0, 12, 345, 345, 345)
    msg = str(ei.value)
    assert msg.startswith(op + ":"), msg
    assert "12 rows of 345 elements" in msg and plan.kernel in msg and "illegal memory access" in msg
    assert type(ei.value.__cause__).__name__ == "CUDARuntimeError"


def test_launch_error_split_and_cols(no_compile):
    dev = _dispatch.DeviceInfo(132, 90)
    plan = _dispatch.plan_rows(1, 10 ** 7, "float16", "float16", False, dev)
    assert plan.pre_kernel

    class FakeCupy:  # the split workspace allocation must not need a GPU here
        @staticmethod
        def empty(n, dt):
            return 0

    import sys
    real = sys.modules["cupy"]
    sys.modules["cupy"] = FakeCupy
    try:
        with pytest.raises(RuntimeError, match=r"cusoftmax.softmax: .*1 rows of 10000000 elements"):
            _launch.Launch(plan, 0).rows(0, 0, 1, 10 ** 7, 10 ** 7, 10 ** 7)
    finally:
        sys.modules["cupy"] = real
    cp = _dispatch.plan_cols(3, 50, 7, "float32", "float32", True, dev)
    with pytest.raises(RuntimeError, match=r"cusoftmax.log_softmax: .*outer 3, reduced 50, inner 7"):
        _launch.Launch(cp, 0).cols(0, 0, 3, 50, 7, 350, 7, 350, 7)


def test_other_errors_pass_through(monkeypatch):
    def typo(grid, block, args, **kw):
        raise TypeError("bad argument")

    monkeypatch.setattr(_launch, "get_kernel", lambda src, name, dev: typo)
    plan = _dispatch.plan_rows(2, 10, "float32", "float32", False, _dispatch.DeviceInfo(132, 90))
    with pytest.raises(TypeError, match="bad argument"):
        _launch.Launch(plan, 0).rows(0, 0, 2, 10, 10, 10)


def test_explicit_op_label(no_compile):
    plan = _dispatch.plan_rows(2, 10, "float32", "float32", False, _dispatch.DeviceInfo(132, 90))
    with pytest.raises(RuntimeError, match=r"^cusoftmax.softmax_backward: "):
        _launch.Launch(plan, 0, op="softmax_backward").rows(0, 0, 2, 10, 10, 10)


class _SmemKernel:
    """A kernel handle that records its dynamic shared memory opt-in."""

    def __init__(self):
        self.max_dynamic_shared_size_bytes = 48 * 1024
        self.launched = []

    def __call__(self, grid, block, args, shared_mem=0, **kw):
        assert shared_mem <= self.max_dynamic_shared_size_bytes, "launch above the opt-in fails on a GPU"
        self.launched.append(shared_mem)


def test_shared_kernel_opt_in_only_grows(monkeypatch):
    """Plans of one kernel with different shared memory share its function
    handle: building a smaller plan after a larger one must not lower the
    opt-in the larger one launches with (that launch would fail)."""
    fn = _SmemKernel()
    monkeypatch.setattr(_launch, "get_kernel", lambda src, name, dev: fn)
    dev = _dispatch.DeviceInfo(132, 90)
    # float64 scalars: the staged kernel, its tile's shared memory growing with L
    big = _dispatch.plan_cols(1, 1500, 4096, "float64", "float64", False, dev, 1)
    small = _dispatch.plan_cols(1, 700, 4096, "float64", "float64", False, dev, 1)
    assert big.kernel == small.kernel and big.kernel.startswith("softmax_cols_staged")
    assert small.smem < big.smem
    lb = _launch.Launch(big, 0)
    ls = _launch.Launch(small, 0)
    assert fn.max_dynamic_shared_size_bytes >= big.smem
    lb.cols(0, 0, 1, 1500, 4096, 0, 4096, 0, 4096)
    ls.cols(0, 0, 1, 700, 4096, 0, 4096, 0, 4096)
    assert fn.launched == [big.smem, small.smem]


def test_zeroed_workspace_per_kind_and_stream_grows_and_keeps(monkeypatch):
    """One zeroed buffer per (kernel family, device, stream), reused; a
    request for more replaces it with a larger one and keeps the old alive
    (queued launches and captured graphs may still use it)."""
    made = []

    class _Buf:
        def __init__(self, n):
            self.nbytes = n
            self.data = type("D", (), {"ptr": 4096 * (len(made) + 1)})()
            made.append(self)

    class _FakeCupy:
        @staticmethod
        def zeros(n, dtype):
            return _Buf(n)

    monkeypatch.setattr(_launch, "_cupy", _FakeCupy)
    monkeypatch.setattr(_launch, "on_device", lambda d: contextlib.nullcontext())
    monkeypatch.setattr(_launch, "_sync_ws", {})
    monkeypatch.setattr(_launch, "_sync_retired", [])
    a = _launch.zeroed_workspace(0, 11, "topk_seg", 4096)
    assert _launch.zeroed_workspace(0, 11, "topk_seg", 100) == a and len(made) == 1
    b = _launch.zeroed_workspace(0, 12, "topk_seg", 4096)  # another stream
    c = _launch.zeroed_workspace(0, 11, "rowsync", 4096)  # another family
    assert len({a, b, c}) == 3
    d = _launch.zeroed_workspace(0, 11, "topk_seg", 8192)  # grows
    assert d != a and made[-1].nbytes == 8192 and _launch._sync_retired == [made[0]]
    assert _launch.zeroed_workspace(0, 11, "topk_seg", 4096) == d


def test_cols_sync_launch_reuses_parameters_and_falls_back(monkeypatch):
    """softmax_cols_sync's launcher path without a GPU (stand-ins for the
    driver): one parameter buffer per shape, its pointer slots rewritten per
    call (x, y, partials, tile counters); a grid the driver refuses as too
    large runs the split-stream fallback with the same arguments; any other
    refusal raises naming the operation and the shape."""
    dev = _dispatch.DeviceInfo(132, 90)
    # (the sync planner's plan: plan_cols takes 8-byte packs in clusters there, COLS_CL_HALF_NR)
    plan = _dispatch._plan_cols_sync(1, 2048, 4096, "float32", "float32", False, dev, 4)
    assert plan.kernel.startswith("softmax_cols_sync") and plan.sync
    monkeypatch.setattr(_launch, "get_kernel", lambda src, name, dev: _SmemKernel())

    class _Buf:
        def __init__(self, ptr):
            self.data = type("D", (), {"ptr": ptr})()

    bufs = iter(range(1 << 20, 1 << 30, 1 << 20))
    monkeypatch.setattr(_launch, "_cupy", type("C", (), {"empty": staticmethod(lambda n, dt: _Buf(next(bufs)))}))
    monkeypatch.setattr(_launch, "_current_stream", lambda: type("S", (), {"ptr": 7})())
    monkeypatch.setattr(_launch, "zeroed_workspace", lambda dev_id, stream, kind, n: 4096 * (kind == "colsync"))
    calls, rc = [], [0]

    def coop(fptr, gx, gy, gz, bx, by, bz, smem, stream, addr):
        calls.append(((gx, bx, smem, stream), list(next(iter(ln.cols_prm.values())).vals)))
        return rc[0]

    monkeypatch.setattr(_launch, "_coop_launch", coop)
    ln = _launch.Launch(plan, 0)
    args = (1, 2048, 4096, 2048 * 4096, 4096, 2048 * 4096, 4096)
    ln.cols(111, 222, *args)
    ln.cols(333, 444, *args)
    assert len(ln.cols_prm) == 1 and len(calls) == 2
    (dims, v0), (_, v1) = calls
    assert dims == (plan.grid[0], plan.block[0], plan.smem, 7)
    tx, splits = plan.extra[0], plan.extra[1]
    assert v0[:11] == [111, 222, *args, splits, tx] and v1[:2] == [333, 444] and v0[12] == v1[12] == 4096
    assert v0[11] != v1[11]  # a fresh partials buffer per call
    fell = []
    ln.fallback = type("F", (), {"cols": lambda self, *a: fell.append(a)})()
    rc[0] = _launch._COOP_TOO_LARGE
    ln.cols(555, 666, *args)
    assert fell == [(555, 666, *args)]
    rc[0] = 1
    with pytest.raises(RuntimeError, match=r"cusoftmax.softmax: cuLaunchCooperativeKernel failed \(CUresult 1\)"
                                           r".*outer 1, reduced 2048, inner 4096"):
        ln.cols(0, 0, *args)


def test_cols_fold_launch_passes_fold_and_falls_back_unfolded(monkeypatch):
    """softmax_cols_sync's FOLD launch without a GPU: the kernel gets the
    reshaped (L / f, I x f) problem plus the original I as its last argument,
    and a refused grid runs the fallback (the split stream of the original
    problem) on the original, unfolded shape and strides."""
    dev = _dispatch.DeviceInfo(132, 90)
    O, L, I = 1, 4000, 1001
    plan = _dispatch._plan_cols_fold(O, L, I, "float32", "float32", False, dev, 1)
    assert plan is not None and plan.fold == 4 and plan.kernel.endswith("true, true>")
    assert plan.fallback.kernel.startswith("softmax_cols_split_finish") and plan.fallback.fold == 1
    monkeypatch.setattr(_launch, "get_kernel", lambda src, name, dev: _SmemKernel())

    class _Buf:
        def __init__(self, ptr):
            self.data = type("D", (), {"ptr": ptr})()

    monkeypatch.setattr(_launch, "_cupy", type("C", (), {"empty": staticmethod(lambda n, dt: _Buf(1 << 20))}))
    monkeypatch.setattr(_launch, "_current_stream", lambda: type("S", (), {"ptr": 7})())
    monkeypatch.setattr(_launch, "zeroed_workspace", lambda dev_id, stream, kind, n: 4096)
    calls, rc = [], [0]

    def coop(fptr, gx, gy, gz, bx, by, bz, smem, stream, addr):
        calls.append(list(next(iter(ln.cols_prm.values())).vals))
        return rc[0]

    monkeypatch.setattr(_launch, "_coop_launch", coop)
    ln = _launch.Launch(plan, 0)
    f = plan.fold
    args = (O, L // f, I * f, L * I, I * f, L * I, I * f)
    ln.cols(111, 222, *args)
    assert calls[0][:9] == [111, 222, *args] and calls[0][13] == I and len(calls[0]) == 16
    # nrs, rps: the folded axis's rows shared evenly by the splits, at most NR packs a thread
    tx, splits, _, nr = plan.extra
    ny = 256 // tx
    nrs = -(-(-(-(L // f) // ny)) // splits)
    assert calls[0][14:] == [nrs, ny * nrs] and nrs <= nr and splits * ny * nrs >= L // f
    fell = []
    ln.fallback = type("F", (), {"cols": lambda self, *a: fell.append(a)})()
    rc[0] = _launch._COOP_TOO_LARGE
    ln.cols(555, 666, *args)
    assert fell == [(555, 666, O, L, I, L * I, I, L * I, I)]


def test_cols_fold_rules():
    """_plan_cols_fold: the fold factor (16-byte pack / gcd(I, pack)); None
    where I is a multiple of the pack, L is not a multiple of the factor, or
    the compute is float64; one slab's blocks a round; plan_cols takes it only
    for dense slabs (its ``dense`` flag) of arrays of at least
    COLS_FOLD_MIN_BYTES; the compile-check enumeration lists its kernels."""
    dev = _dispatch.DeviceInfo(132, 90)
    ff = _dispatch.fold_factor
    assert (ff(1001, "float32", "float32"), ff(1002, "float32", "float32"), ff(1000, "float32", "float32")) == (4, 2, 1)
    assert (ff(1001, "bfloat16", "bfloat16"), ff(1500, "float16", "float16"), ff(255, "float32", "bfloat16")) == (8, 2, 4)
    assert _dispatch._plan_cols_fold(1, 4002, 1001, "float32", "float32", False, dev, 1) is None  # 4002 % 4
    assert _dispatch._plan_cols_fold(1, 4000, 1000, "float32", "float32", False, dev, 4) is None  # aligned
    assert _dispatch._plan_cols_fold(1, 4000, 1001, "float64", "float64", False, dev, 1) is None
    for dt in ("float32", "bfloat16", "float16"):
        for O, L, I in ((1, 4000, 1001), (3, 512, 37), (1, 16384, 255)):
            p = _dispatch._plan_cols_fold(O, L, I, dt, dt, True, dev, 1)
            assert p is not None and p.sync and p.fold == ff(I, dt, dt), (dt, O, L, I, p)
            tx, splits, tiles, r = p.extra
            unit = tiles // O * splits  # one slab's blocks
            assert tiles % O == 0 and p.grid[0] % unit == 0 and p.grid[0] <= tiles * splits, p
            auto = _dispatch.plan_cols(O, L, I, dt, dt, True, dev, 1, True)
            big = O * L * I * (4 if dt == "float32" else 2) >= _dispatch.COLS_FOLD_MIN_BYTES
            assert (auto.fold > 1) == big, auto
            assert _dispatch.plan_cols(O, L, I, dt, dt, True, dev, 1, False).fold == 1
    # 8-byte narrow packs keep the narrow-pack plan (16-bit I a multiple of 4, not 8)
    assert _dispatch.plan_cols(1, 4000, 1500, "bfloat16", "bfloat16", False, dev, 4, True).fold == 1
    names = _forward_names(dev)
    assert "softmax_cols_sync<float, float, false, 4, 256, 16, 2, true, true>" in names


@pytest.mark.usefixtures("no_cl16")
def test_cols_fold_over_rounds_rules(monkeypatch):
    """_fold_over_rounds: where the narrow-pack sync plan or the skewed sync
    plan would take COLS_FOLD_NARROW_ROUNDS rounds or more, plan_cols takes
    the folded sync kernel in one round instead, on dense slabs only,
    whatever the array's size (below COLS_FOLD_MIN_BYTES too) and the
    unit-stride length's pack (scalars, 4- and 8-byte packs); one-round sync
    plans and cluster plans stay; COLS_FOLD_NARROW_ROUNDS = 0 turns it off.
    Every kernel it picks is in the compile-check enumeration."""
    h100 = _dispatch.DeviceInfo(132, 90, 232448)
    names = _forward_names(h100)

    def rounds(p):
        return -(-p.extra[2] * p.extra[1] // p.grid[0])

    # (dtype, L, I, vec): narrow scalar sync (vec 1, 2, 4) and skewed sync (vec 2, 4) in two rounds
    moved = [("bfloat16", 3000, 1001, 1), ("float16", 2400, 1001, 1), ("bfloat16", 2600, 1002, 2),
             ("float16", 5000, 700, 4), ("float32", 4000, 718, 2), ("bfloat16", 8000, 1002, 2),
             ("float16", 8000, 940, 4), ("float32", 1000, 4002, 2)]
    for dt, L, I, vec in moved:
        isz = 4 if dt == "float32" else 2
        for log in (False, True):
            p = _dispatch.plan_cols(1, L, I, dt, dt, log, h100, vec, True, True)
            assert p.sync and p.fold == _dispatch.fold_factor(I, dt, dt) > 1 and rounds(p) == 1, (dt, L, I, p)
            assert p.kernel.endswith("true, true>") and p.kernel in names, p
            with monkeypatch.context() as m:
                m.setattr(_dispatch, "COLS_FOLD_NARROW_ROUNDS", 0)
                m.setattr(_dispatch, "COLS_SLAB_MIN_L", 1 << 62)  # (a sync plan in rounds: the slab rule's)
                q = _dispatch.plan_cols(1, L, I, dt, dt, log, h100, vec, True, True)
            assert q.sync and q.fold == 1 and rounds(q) >= 2, (dt, L, I, q)
            assert L * I * isz < _dispatch.COLS_FOLD_MIN_BYTES or vec > 1, (dt, L, I)  # (not the size rule)
            assert _dispatch.plan_cols(1, L, I, dt, dt, log, h100, vec, False, True).fold == 1  # not dense
    # one-round sync plans (skewed, narrow) and cluster plans stay
    for dt, L, I, vec in [("bfloat16", 6000, 1002, 2), ("bfloat16", 2000, 3002, 2), ("float16", 16384, 127, 1),
                          ("bfloat16", 2000, 1001, 1), ("float32", 1000, 1001, 1)]:
        p = _dispatch.plan_cols(1, L, I, dt, dt, False, h100, vec, True, True)
        assert p.fold == 1 and (not p.sync or rounds(p) == 1), (dt, L, I, p)


@pytest.mark.usefixtures("no_cl16")
def test_cols_cl_small_rules(monkeypatch):
    """_cols_cl_small: an array of at most COLS_CL_SMALL_MAX_BYTES whose
    cluster or sync plan has at most SMs / COLS_CL_SMALL_DIV[itemsize]
    blocks takes the cluster kernel on 32-byte tiles (else 64) in clusters
    of 8 at an NR of COLS_CL_SMALL_NR, where that has more blocks; larger
    grids, larger arrays, mixed dtypes and NR 16 axes keep their plans;
    COLS_CL_SMALL = False turns it off; every kernel it picks is listed by
    the compile check."""
    h100 = _dispatch.DeviceInfo(132, 90, 232448)
    names = _forward_names(h100)
    monkeypatch.setattr(_dispatch, "COLS_FILL4", False)  # (it follows this rule: test_cols_fill4_rules)

    def blocks(p):
        return p.grid[0] * (p.grid[1] if len(p.grid) > 1 else 1)

    # (dtype, O, L, I, the tile's bytes)
    for dt, O, L, I, seg in [("bfloat16", 1, 4000, 64, 32), ("float16", 1, 8000, 64, 32), ("bfloat16", 1, 2000, 200, 64),
                             ("float32", 1, 4000, 64, 32), ("float32", 1, 6000, 32, 32), ("float16", 4, 2000, 64, 64)]:
        isz = 4 if dt == "float32" else 2
        for log in (False, True):
            p = _dispatch.plan_cols(O, L, I, dt, dt, log, h100, 16 // isz, True, True)
            with monkeypatch.context() as m:
                m.setattr(_dispatch, "COLS_CL_SMALL", False)
                m.setattr(_dispatch, "COLS_SYNC_SMALL", False)
                q = _dispatch.plan_cols(O, L, I, dt, dt, log, h100, 16 // isz, True, True)
            assert p.kernel.startswith("softmax_cols_cl<") and p.extra[1] == 8, (dt, L, I, p)
            assert p.extra[0] * 16 == seg and p.extra[3] in _dispatch.COLS_CL_SMALL_NR, (dt, L, I, p)
            assert blocks(q) <= h100.sm_count // _dispatch.COLS_CL_SMALL_DIV[isz] and blocks(q) < blocks(p), (p, q)
            assert p.kernel in names, p
    # kept: grids over the bound, arrays over the size bound, another output dtype
    for dt, odt, L, I in [("float32", "float32", 2000, 512), ("float16", "float16", 2048, 1024),
                          ("bfloat16", "bfloat16", 8192, 512), ("float32", "bfloat16", 4000, 64)]:
        vec = 16 // (2 if odt != "float32" or dt != "float32" else 4)
        p = _dispatch.plan_cols(1, L, I, dt, odt, False, h100, vec, True, True)
        with monkeypatch.context() as m:
            m.setattr(_dispatch, "COLS_CL_SMALL", False)
            m.setattr(_dispatch, "COLS_SYNC_SMALL", False)
            q = _dispatch.plan_cols(1, L, I, dt, odt, False, h100, vec, True, True)
        assert p == q, (dt, odt, L, I, p, q)
    # 8-byte 16-bit packs: clusters of 6 or 8 on 32-byte tiles at NR 8 / 16 where the narrow plan has at most
    # SMs / COLS_CL_SMALL_NARROW_DIV blocks ((4000, 500): 64 blocks, kept)
    for dt, L, I, moved in [("bfloat16", 4000, 100, True), ("float16", 3000, 300, True), ("bfloat16", 4000, 500, False)]:
        p = _dispatch.plan_cols(1, L, I, dt, dt, False, h100, 4, True, True)
        with monkeypatch.context() as m:
            m.setattr(_dispatch, "COLS_CL_SMALL_NARROW", False)
            q = _dispatch.plan_cols(1, L, I, dt, dt, False, h100, 4, True, True)
        assert (p != q) == moved, (dt, L, I, p, q)
        if moved:
            assert p.kernel.startswith("softmax_cols_cl<") and ", 4, 256, " in p.kernel and p.extra[1] in (6, 8), p
            assert p.extra[0] * 8 == 32 and p.extra[3] in _dispatch.COLS_CL_SMALL_NARROW_NR and p.kernel in names, p
            assert blocks(q) <= h100.sm_count // _dispatch.COLS_CL_SMALL_NARROW_DIV < blocks(p), (p, q)
    # sync plans of few blocks with no cluster form: NR 4 on 64-byte tiles, one round
    for dt, L, I in [("bfloat16", 16000, 64), ("float16", 12000, 96), ("float32", 12000, 16)]:
        isz = 4 if dt == "float32" else 2
        for log in (False, True):
            p = _dispatch.plan_cols(1, L, I, dt, dt, log, h100, 16 // isz, True, True)
            with monkeypatch.context() as m:
                m.setattr(_dispatch, "COLS_SYNC_SMALL", False)
                q = _dispatch.plan_cols(1, L, I, dt, dt, log, h100, 16 // isz, True, True)
            assert p.sync and q.sync and p.extra[3] == 4 and p.extra[0] * 16 == _dispatch.COLS_SYNC_SMALL_SEGMENT, p
            assert blocks(q) <= h100.sm_count // _dispatch.COLS_CL_SMALL_DIV[isz] < blocks(p), (p, q)
            assert -(-p.extra[2] * p.extra[1] // p.grid[0]) == 1 and p.kernel in names, p


def test_op_label_reads_the_log_flag_not_later_flags():
    """Error messages name the operation from the kernel's first boolean
    template argument (LOG): later flags (softmax_cols_sync's PF,
    softmax_backward_stream's REV) must not turn softmax into log_softmax."""
    dev = _dispatch.DeviceInfo(132, 90)
    for log in (False, True):
        want = "log_softmax" if log else "softmax"
        p = _dispatch._plan_cols_sync(1, 2048, 4096, "float32", "float32", log, dev, 4)
        assert p.kernel.endswith(", true>") and _launch._op_label(p) == want, p.kernel
        # (bfloat16: float32 rows this long take the cluster stream, no REV flag)
        b = _dispatch.plan_backward_rows(4096, 300000, "bfloat16", "bfloat16", "bfloat16", log, dev)
        stream = [k for k in b.kernels() if k.startswith("softmax_backward_stream<")]
        assert stream and all(k.endswith(", true>") for k in stream), b  # REV
        for k in stream:
            assert _launch._op_label(dataclasses.replace(b, kernel=k)) == want + "_backward", k
        c = _dispatch.plan_backward_rows(4096, 300000, "float32", "float32", "float32", log, dev)
        assert c.regime == "cstream" and _launch._op_label(c) == want + "_backward", c.kernel


def test_cols_skew_rules():
    """_choose_cols_skew: plan_cols takes the skewed-pack cluster plan only
    with its ``skew`` flag, on sm_90, for same-dtype 16-bit arrays
    whose axis is off the 16-byte grid, with rows of at least
    COLS_SKEW_MIN_ROW_BYTES and at least COLS_SKEW_MIN_BYTES in all (after
    the fold, which wins where it applies); its packs are
    COLS_SKEW_PACK_BYTES, a tile writes TX - 2 packs a row, and the
    compile-check enumeration lists its kernels."""
    h100, a100 = _dispatch.DeviceInfo(132, 90), _dispatch.DeviceInfo(108, 80)
    names = _forward_names(h100)
    for dt, I in (("bfloat16", 5001), ("float16", 3001)):
        isz = 2
        L = 1400  # (both axes of 2000 and more: the skewed sync plan)
        for log in (False, True):
            p = _dispatch.plan_cols(1, L, I, dt, dt, log, h100, 1, True, True)
            assert p.kernel.startswith("softmax_cols_cl") and p.kernel.endswith(", 1, true>"), p
            v = int(p.kernel.split(", ")[3])
            assert v * isz == _dispatch.COLS_SKEW_PACK_BYTES[isz], p
            tx = p.extra[0]
            assert p.grid[1] == -(-(I + v - 1) // ((tx - 2) * v)), p  # tiles: TX - 2 packs written a row
            assert p.kernel in names, p
            assert not _dispatch.plan_cols(1, L, I, dt, dt, log, h100, 1, True, False).kernel.endswith("true>")
            assert not _dispatch.plan_cols(1, L, I, dt, dt, log, a100, 1, True, True).kernel.endswith(", true>")
        # below the bounds: the narrow plans
        small_row = _dispatch.COLS_SKEW_MIN_ROW_BYTES[isz] // isz - 3
        assert not _dispatch.plan_cols(1, 2000, small_row, dt, dt, False, h100, 1, True, True).kernel.endswith(
            ", 1, true>")
        assert not _dispatch.plan_cols(1, 300, I, dt, dt, False, h100, 1, True, True).kernel.endswith(", 1, true>")
    # float32 keeps the narrow plans (log_softmax lost), and lists no skewed kernel
    assert not _dispatch.plan_cols(1, 1000, 5001, "float32", "float32", False, h100, 1, True, True).kernel.endswith(
        ", 1, true>")
    assert not any(k.startswith("softmax_cols_cl<float,") and k.endswith(", true>") for k in names)
    # the fold first where it applies (dense, scalar packs, one slab's blocks at once)
    assert _dispatch.plan_cols(1, 4000, 1001, "float32", "float32", False, h100, 1, True, True).fold == 4
    assert _dispatch._plan_cols_cl(1, 2000, 5, "float32", "float32", False, h100, 1, nr=8, v=4, sk=True) is None
    # COLS_SKEW_ONLY_WIDER: 8-byte 16-bit packs (I a multiple of 4) on axes of at least
    # COLS_SKEW_ONLY_WIDER_MIN_L rows take the narrow plans (no wider packs to gain), shorter axes the skewed plan
    assert _dispatch.COLS_SKEW_ONLY_WIDER and _dispatch.COLS_SKEW_ONLY_WIDER_MIN_L == 1200
    for dt in ("bfloat16", "float16"):
        for L, I, skewed in ((1500, 3500, False), (1200, 12004, False), (1199, 12004, True), (1000, 4500, True)):
            p = _dispatch.plan_cols(1, L, I, dt, dt, False, h100, 4, True, True)
            assert p.kernel.endswith(", 1, true>") == skewed, (L, I, p)
            if not skewed:
                assert p.kernel.startswith("softmax_cols_cl<") and ", 4, 256, " in p.kernel and p.kernel in names, p
                old = _dispatch.COLS_SKEW_ONLY_WIDER
                _dispatch.COLS_SKEW_ONLY_WIDER = False
                try:
                    assert _dispatch.plan_cols(1, L, I, dt, dt, False, h100, 4, True, True).kernel.endswith(", true>")
                finally:
                    _dispatch.COLS_SKEW_ONLY_WIDER = old


def test_cols_sync_skew_rules():
    """_choose_cols_sync_skew: plan_cols takes softmax_cols_sync's SK form
    only with its ``skew`` flag, on sm_90, for same-dtype arrays of
    COLS_SYNC_SK_DTYPES (log_softmax: not of COLS_SYNC_SK_NO_LOG) whose axis
    is off the 16-byte grid, split over at
    most COLS_SYNC_SK_MAX_SPLITS blocks a tile, and then where both axes are
    at least COLS_SYNC_SK_MIN_LI long (L, I) or the array would otherwise stream
    split (after the folded sync kernel, which wins where it applies). The
    plan: 16-byte packs, NR COLS_SYNC_SK_NR at COLS_SYNC_SK_MINB blocks an
    SM, tiles of COLS_SYNC_SK_SEGMENT bytes writing two packs fewer than
    they load, its fallback the unskewed split stream; the compile-check
    enumeration lists its kernels (sm_90 only)."""
    h100, a100 = _dispatch.DeviceInfo(132, 90), _dispatch.DeviceInfo(108, 80)
    names = _forward_names(h100)
    names80 = _forward_names(a100)
    assert not any(k.endswith(", false, true>") and "cols_sync" in k for k in names80)
    for dt, L, I in (("float32", 8000, 1001), ("float32", 16384, 1001), ("float32", 8192, 4095),
                     ("float32", 2000, 3001), ("float32", 16384, 1002), ("bfloat16", 8192, 4095),
                     ("bfloat16", 6000, 3001), ("bfloat16", 2000, 3001), ("bfloat16", 12000, 2001),
                     ("float16", 8192, 4095), ("float16", 2000, 3001), ("float32", 1000, 5001),
                     ("float32", 800, 3001)):
        isz = 4 if dt == "float32" else 2
        v = 16 // isz
        vec = v
        while I % vec:
            vec //= 2
        for log in (False, True):
            p = _dispatch.plan_cols(1, L, I, dt, dt, log, h100, vec, True, True)
            if log and dt in _dispatch.COLS_SYNC_SK_NO_LOG:  # (dtypes whose log_softmax is kept from it)
                assert not p.kernel.endswith(", false, true>"), (dt, L, I, p)
                continue
            assert p.sync and p.kernel.endswith(", false, true>"), (dt, L, I, p)
            assert p.kernel.split("<")[1].split(", ")[3] == str(v), p  # 16-byte packs
            assert f", {_dispatch.COLS_SYNC_SK_NR}, {_dispatch.COLS_SYNC_SK_MINB}, true, false, true>" in p.kernel
            tx, splits, tiles, _ = p.extra
            assert tx * v * isz == _dispatch.COLS_SYNC_SK_SEGMENT, p
            assert tiles == -(-(I + v - 1) // ((tx - 2) * v)), p
            assert splits <= _dispatch.COLS_SYNC_SK_MAX_SPLITS[isz], p
            assert p.kernel in names and p.fallback is not None and p.fallback.pre_kernel, p
            for dense, skew, dev in ((True, False, h100), (False, False, h100), (True, True, a100)):
                q = _dispatch.plan_cols(1, L, I, dt, dt, log, dev, vec, dense, skew)
                assert not q.kernel.endswith(", false, true>"), (dense, skew, dev, q)
    # too many splits; short axes (the cluster plans); the fold first where it applies
    for dt, L, I in (("float16", 16384, 1001), ("float32", 30000, 1001),
                     ("bfloat16", 16384, 1001), ("float32", 799, 5001), ("float32", 1000, 2999),
                     ("bfloat16", 1000, 5001), ("bfloat16", 1999, 3001),
                     ("float32", 1000, 1001), ("float32", 4000, 1001), ("bfloat16", 8000, 1001),
                     ("bfloat16", 2000, 1001), ("float16", 1000, 5001)):
        p = _dispatch.plan_cols(1, L, I, dt, dt, False, h100, 1, True, True)
        assert not p.kernel.endswith(", false, true>"), (dt, L, I, p)
    for dt in _dispatch.COLS_SYNC_SK_NO_LOG:  # (none now: float16 log_softmax's form fits since the rows-a-split args)
        assert _dispatch._choose_cols_sync_skew(1, 8000, 1001, dt, dt, True, h100) is None
    assert _dispatch._choose_cols_sync_skew(1, 8000, 1001, "float16", "float16", True, h100) is not None
    assert _dispatch._choose_cols_sync_skew(1, 8000, 1001, "float32", "bfloat16", False, h100) is None
    assert _dispatch._choose_cols_sync_skew(1, 8000, 1001, "float32", "float32", False, a100) is None
    assert _dispatch._choose_cols_sync_skew(1, 100, 1001, "float32", "float32", False, h100) is None  # < a block


@pytest.mark.usefixtures("no_cl16")
def test_cols_sync4_sync8_rules(monkeypatch):
    """On sm_90: float32 sync plans at NR 4 take the cluster plan of 16-byte
    packs at NR COLS_SYNC4_CL_NR on COLS_SYNC4_CL_SEGMENT-byte tiles where it
    has at most COLS_SYNC4_CL_MAX_GRID x SMs blocks; bfloat16 narrow-pack
    sync plans of two rounds or more on dense slabs of 8-byte packs (the fold
    would follow) take the sync plan of 8-byte packs at NR
    COLS_NARROW_SYNC8_NR on COLS_NARROW_SYNC8_SEGMENT-byte tiles where it
    runs in one round. Grids over the cap, float16, non-dense slabs,
    one-round plans, 16-bit NR 4 sync plans and sm_80 keep their plans, as
    does everything with the switches off. Every plan given is in the
    compile-check enumeration."""
    h100, a100 = _dispatch.DeviceInfo(132, 90, 232448), _dispatch.DeviceInfo(108, 80, 167936)
    names = _forward_names(h100)
    P, blocks = _dispatch.plan_cols, _dispatch._blocks

    with_ = functools.partial(_plan_cols_with, monkeypatch)

    assert _dispatch.COLS_SYNC4_CL_MAX_GRID == 1.75
    for log in (False, True):
        LG = str(log).lower()
        # float32: sync plans of 264-392 blocks at NR 4 -> clusters of 8 at NR 8, 136-224 blocks
        for L, I in ((4000, 300), (3000, 384), (3200, 400), (4050, 260), (3500, 448)):
            a = (1, L, I, "float32", "float32", log, h100, 4, True, False)
            p, q = P(*a), with_("COLS_SYNC4_CL_DTYPES", (), *a)
            assert q.sync and q.extra[3] == 4 and blocks(q) >= h100.sm_count, (L, I, q)
            assert p.kernel == f"softmax_cols_cl<float, float, {LG}, 4, 256, {_dispatch.COLS_SYNC4_CL_NR}, 8, 2, 1>", p
            assert p.extra[0] * 16 == _dispatch.COLS_SYNC4_CL_SEGMENT and p.kernel in names, p
            assert blocks(p) <= _dispatch.COLS_SYNC4_CL_MAX_GRID * h100.sm_count, p
            a = (1, L, I, "float32", "float32", log, a100, 4, True, False)
            assert P(*a) == with_("COLS_SYNC4_CL_DTYPES", (), *a) and P(*a).sync
        # kept: grids over the cap ((2050, 512): 256 blocks, (2050, 736): 368), 16-bit NR 4 sync plans
        for dt, L, I in (("float32", 2050, 512), ("float32", 2050, 736), ("bfloat16", 16000, 64),
                         ("float16", 12000, 96)):
            a = (1, L, I, dt, dt, log, h100, 16 // (4 if dt == "float32" else 2), True, False)
            assert P(*a).sync and P(*a).extra[3] == 4, (dt, L, I, P(*a))
            assert P(*a) == with_("COLS_SYNC4_CL_DTYPES", (), *a)
        a = (1, 2050, 512, "float32", "float32", log, h100, 4, True, False)
        assert P(*a) != with_("COLS_SYNC4_CL_MAX_GRID", 2.0, *a)
        # bfloat16: folded sync plans (fill4's long form at (8000, 300); unfolded scalars at L = 4203, odd) ->
        # 8-byte packs at NR 16 on 128-byte tiles, one round
        for L, I in ((8000, 500), (4200, 900), (13000, 300), (25000, 100), (8000, 300), (4203, 900)):
            a = (1, L, I, "bfloat16", "bfloat16", log, h100, 4, True, True)
            p, q = P(*a), with_("COLS_NARROW_SYNC8_DTYPES", (), *a)
            assert p != q and p.kernel == (f"softmax_cols_sync<bf16_t, bf16_t, {LG}, 4, 256, "
                                           f"{_dispatch.COLS_NARROW_SYNC8_NR}, 2, false>"), (L, I, p)
            assert p.kernel in names and p.fold == 1 and _dispatch._sync_rounds(p) == 1, p
            assert p.extra[0] * 8 == _dispatch.COLS_NARROW_SYNC8_SEGMENT, p
            assert q.fold == 2 or q.kernel.startswith("softmax_cols_cl<") or q.extra[3] == 32, q
            for dt, dense, dev in (("float16", True, h100), ("bfloat16", False, h100), ("bfloat16", True, a100)):
                b = (1, L, I, dt, dt, log, dev, 4, dense, dense)
                assert P(*b) == with_("COLS_NARROW_SYNC8_DTYPES", (), *b), (dt, dense, dev, L, I)
        # kept: a one-round narrow sync plan ((8000, 100): scalars at NR 32 in 128 blocks)
        a = (1, 8000, 100, "bfloat16", "bfloat16", log, h100, 4, True, True)
        assert P(*a) == with_("COLS_NARROW_SYNC8_DTYPES", (), *a) and P(*a).sync


@pytest.mark.usefixtures("no_cl16")
def test_cols_fill4_rules(monkeypatch):
    """_cols_fill4: on sm_90, a same-dtype array of COLS_FILL4_DTYPES of at
    least COLS_FILL4_MIN_BYTES whose plan (16-bit: the narrow-pack cluster
    plan of 8-byte packs; float32: the cluster or sync plan of 16-byte packs)
    has under COLS_FILL4_MAX_BLOCKS x SMs blocks takes the cluster plan of
    4-byte packs on full COLS_FILL4_SEGMENT-byte tiles at NR COLS_FILL4_NR,
    with at least as many blocks and at most COLS_FILL4_MAX_GRID x SMs;
    plans of more blocks, grids over the cap, arrays under the floor, axes
    narrower than a tile or too long for NR 16 clusters of 8, scalar packs,
    16-bit 16-byte packs, float32 8-byte packs and sm_80 keep their plans, as
    does everything with COLS_FILL4 off. Sync plans on axes too long for NR
    16 (COLS_FILL4_LONG_DTYPES: float32's; 16-bit narrow-pack ones, folded or
    not) take NR COLS_FILL4_LONG_NR within COLS_FILL4_LONG_MAX_GRID x SMs
    blocks; cluster plans there keep theirs.
    Every plan it gives is in the compile-check enumeration."""
    h100, a100 = _dispatch.DeviceInfo(132, 90, 232448), _dispatch.DeviceInfo(108, 80, 167936)
    names = _forward_names(h100)
    P, blocks = _dispatch.plan_cols, _dispatch._blocks
    # the rules as measured, before the later ones in front of them (test_cols_sync4_sync8_rules): bfloat16's
    # 8-byte-pack sync plans in place of the fold, float32's NR 8 cluster plans in place of NR 4 sync plans
    monkeypatch.setattr(_dispatch, "COLS_NARROW_SYNC8_DTYPES", ())
    monkeypatch.setattr(_dispatch, "COLS_SYNC4_CL_DTYPES", ())

    with_ = functools.partial(_plan_cols_with, monkeypatch)

    def off(*a):
        return with_("COLS_FILL4", False, *a)

    assert _dispatch.COLS_FILL4_MIN_BYTES == 256 << 10
    assert _dispatch.COLS_FILL4_MAX_BLOCKS == 1.0 and _dispatch.COLS_FILL4_MAX_GRID == 2.75
    for dt in ("bfloat16", "float16", "float32"):
        T, isz = _dispatch.CTYPE[dt], 4 if dt == "float32" else 2
        # (vec 4: 16-bit 8-byte packs, float32 16-byte packs)
        for log in (False, True):
            LG = str(log).lower()
            # moved: cluster plans of 24-104 blocks ((4000, 100) 16-bit: as many blocks, 7 tiles of 8 rows)
            moved = (((4000, 300), (3000, 500), (4000, 100), (3000, 60), (2500, 780)) if isz == 2 else
                     ((3000, 160), (4000, 200), (2500, 256), (4000, 32), (1000, 128)))
            for L, I in moved:
                a = (1, L, I, dt, dt, log, h100, 4, True, True)
                p, q = P(*a), off(*a)
                assert blocks(q) < h100.sm_count, (L, I, q)
                assert p.kernel.startswith(f"softmax_cols_cl<{T}, {T}, {LG}, {4 // isz}, "), (L, I, p)
                assert p.extra[0] * 4 == _dispatch.COLS_FILL4_SEGMENT and p.extra[3] == _dispatch.COLS_FILL4_NR, p
                assert blocks(q) <= blocks(p) <= 2.75 * h100.sm_count, (p, q)
                assert p.extra[1] in _dispatch.COLS_NARROW_CLUSTERS and p.kernel in names, p
                a = (1, L, I, dt, dt, log, a100, 4, True, True)
                assert P(*a) == off(*a)
            if isz == 2:
                # kept: plans of at least SMs blocks ((2000, 1500): 192), a grid over the cap ((4000, 780): 392
                # blocks), axes too long for NR 16 ((8000, 60)), arrays under the floor ((3000, 36))
                for L, I in ((2000, 1500), (4000, 780), (8000, 60), (3000, 36)):
                    a = (1, L, I, dt, dt, log, h100, 4, True, True)
                    assert P(*a) == off(*a), (L, I)
                # axes narrower than a tile: 8 elements on 8-byte packs (a pointer off the 16-byte grid), 560 KB
                a = (5, 7000, 8, dt, dt, log, h100, 4, False, False)
                assert P(*a) == off(*a) and _dispatch._plan_cols_cl(
                    5, 7000, 8, dt, dt, log, h100, 4, nr=16, v=2, segment=32, clusters=_dispatch.COLS_NARROW_CLUSTERS)
                assert blocks(P(1, 2000, 1500, dt, dt, log, h100, 4, True, True)) >= h100.sm_count
                a = (1, 4000, 780, dt, dt, log, h100, 4, True, True)  # 392 blocks
                assert P(*a) != with_("COLS_FILL4_MAX_GRID", 3.0, *a)
                a = (1, 3000, 36, dt, dt, log, h100, 4, True, True)  # 216 000 bytes
                assert P(*a) != with_("COLS_FILL4_MIN_BYTES", 0, *a)
                # the long form: folded narrow sync plans of 70-96 blocks -> NR 32 in clusters of 5-8; a sync plan
                # whose long form would have fewer blocks keeps its plan ((8000, 100): 128 -> 56)
                for L, I in ((8000, 300), (5000, 500), (7000, 300)):
                    a = (1, L, I, dt, dt, log, h100, 4, True, True)
                    p, q = P(*a), off(*a)
                    assert q.sync and q.fold == 2 and blocks(q) < h100.sm_count, (L, I, q)
                    assert p.kernel.startswith(f"softmax_cols_cl<{T}, {T}, {LG}, 2, "), (L, I, p)
                    assert p.extra[3] == _dispatch.COLS_FILL4_LONG_NR and p.extra[0] * 4 == _dispatch.COLS_FILL4_SEGMENT
                    assert blocks(q) <= blocks(p) <= _dispatch.COLS_FILL4_LONG_MAX_GRID * h100.sm_count, (p, q)
                    assert p.kernel in names and p.fold == 1, p
                    assert with_("COLS_FILL4_LONG_DTYPES", ("float32",), *a) == q
                a = (1, 8000, 100, dt, dt, log, h100, 4, True, True)
                assert P(*a) == off(*a) and P(*a).sync
                # scalar packs (the narrow chooser's scalars at (2000, 300)), and 16-byte packs keep their plans
                for L, I, v in ((2000, 300, 4), (4000, 300, 2), (4000, 304, 8)):
                    a = (1, L, I, dt, dt, log, h100, v, True, True)
                    assert P(*a) == off(*a), (L, I, v)
            else:
                # kept: plans of at least SMs blocks ((4000, 300): a sync plan of 320), grids over the cap ((3000,
                # 600): 114 blocks -> 450), long axes over the long form's cap ((8000, 256): 64 -> 256 blocks) or
                # on a cluster plan ((7000, 32))
                for L, I in ((4000, 300), (3000, 600), (8000, 256), (7000, 32)):
                    a = (1, L, I, dt, dt, log, h100, 4, True, True)
                    assert P(*a) == off(*a), (L, I)
                assert off(1, 7000, 32, dt, dt, log, h100, 4, True, True).kernel.startswith("softmax_cols_cl<")
                # the long form: sync plans of 36-112 blocks on 4097-8192 rows -> NR 32 in clusters of 6-8
                for L, I in ((6000, 96), (8000, 100), (8000, 200), (4500, 100)):
                    a = (1, L, I, dt, dt, log, h100, 4, True, True)
                    p, q = P(*a), off(*a)
                    assert q.sync and blocks(q) < h100.sm_count, (L, I, q)
                    assert p.kernel.startswith(f"softmax_cols_cl<{T}, {T}, {LG}, 1, "), (L, I, p)
                    assert p.extra[3] == _dispatch.COLS_FILL4_LONG_NR and p.extra[0] * 4 == _dispatch.COLS_FILL4_SEGMENT
                    assert blocks(q) <= blocks(p) <= _dispatch.COLS_FILL4_LONG_MAX_GRID * h100.sm_count, (p, q)
                    assert p.kernel in names, p
                    assert with_("COLS_FILL4_LONG_DTYPES", (), *a) == q
                assert blocks(P(1, 4000, 300, dt, dt, log, h100, 4, True, True)) >= h100.sm_count
                a = (1, 3000, 600, dt, dt, log, h100, 4, True, True)
                assert blocks(off(*a)) < h100.sm_count and P(*a) != with_("COLS_FILL4_MAX_GRID", 3.5, *a)
                # narrow float32 packs (8-byte): unchanged
                a = (1, 4000, 302, dt, dt, log, h100, 2, True, True)
                assert P(*a) == off(*a)


@pytest.mark.usefixtures("no_cl16")
def test_cols_cl_fill_rules():
    """_cols_cl_fill: on sm_90, a same-dtype 16-bit array of 16-byte packs
    within COLS_CL_FILL_MAX_BYTES and COLS_CL_FILL_MAX_L whose plan loads the
    SMs unevenly (a sync plan of 1.1-2.3 x SMs blocks or under SMs / 1.25, a
    cluster plan of under SMs / 1.25) takes the cluster plan of 0.9-2.5 x SMs
    blocks (widest tiles, then fewest rows a thread); sync plans of about a
    multiple of SMs blocks, cluster plans of SMs / 1.25 blocks and more, float32,
    narrow packs, longer axes, larger arrays and sm_80 keep their plans, as
    does everything with COLS_CL_FILL off. Every plan it gives is in the
    compile-check enumeration."""
    h100, a100 = _dispatch.DeviceInfo(132, 90, 232448), _dispatch.DeviceInfo(108, 80, 167936)
    names = _forward_names(h100)
    P = _dispatch.plan_cols

    def off(*a):
        old = _dispatch.COLS_CL_FILL
        _dispatch.COLS_CL_FILL = False
        try:
            return P(*a)
        finally:
            _dispatch.COLS_CL_FILL = old

    def lifted(*a):  # the axis and bytes bounds lifted
        old = _dispatch.COLS_CL_FILL_MAX_L, _dispatch.COLS_CL_FILL_MAX_BYTES
        _dispatch.COLS_CL_FILL_MAX_L, _dispatch.COLS_CL_FILL_MAX_BYTES = 1 << 40, 1 << 40
        try:
            return P(*a)
        finally:
            _dispatch.COLS_CL_FILL_MAX_L, _dispatch.COLS_CL_FILL_MAX_BYTES = old

    blocks = _dispatch._blocks
    lo, hi = (f * h100.sm_count for f in _dispatch.COLS_CL_FILL_BLOCKS)
    for dt in ("bfloat16", "float16"):
        for log in (False, True):
            # (shape, the plan without the rule): sync at 304 / 188 / 72 blocks, a cluster plan at 80
            for (L, I), was in (((2000, 1200), "sync"), ((2000, 3000), "sync"), ((6000, 384), "sync"),
                                ((3000, 640), "cl")):
                a = (1, L, I, dt, dt, log, h100, 8, True, False)
                p, q = P(*a), off(*a)
                assert q.kernel.startswith(f"softmax_cols_{was}<"), (L, I, q)
                assert p.kernel.startswith("softmax_cols_cl<") and lo <= blocks(p) <= hi, (L, I, p)
                assert p.kernels()[0] in names and p.cluster == 1 and p.fold == 1
                if was == "cl":
                    assert blocks(p) > blocks(q)
                assert P(1, L, I, dt, dt, log, a100, 8, True, False) == off(1, L, I, dt, dt, log, a100, 8, True, False)
            # even loads stay: sync at 128 (2000, 2048), 120 (6000, 640), 384 (3000, 1000) blocks;
            # a cluster plan of 256 (1000, 4096) and 188 (1000, 3000) blocks
            for L, I in ((2000, 2048), (6000, 640), (3000, 1000), (1000, 4096), (1000, 3000), (2048, 1024)):
                a = (1, L, I, dt, dt, log, h100, 8, True, False)
                assert P(*a) == off(*a), (L, I)
            # bounds: the axis (COLS_CL_FILL_MAX_L) and the bytes (COLS_CL_FILL_MAX_BYTES)
            assert _dispatch.COLS_CL_FILL_MAX_L == 6000 and _dispatch.COLS_CL_FILL_MAX_BYTES == 12 << 20
            p = P(1, 6000, 384, dt, dt, log, h100, 8, True, False)
            assert p != off(1, 6000, 384, dt, dt, log, h100, 8, True, False)
            a = (1, 6008, 384, dt, dt, log, h100, 8, True, False)
            assert P(*a) == off(*a) and P(*a) != lifted(*a)
            a = (1, 2000, 3000, dt, dt, log, h100, 8, True, False)  # 12 000 000 bytes: in
            assert P(*a) != off(*a)
            a = (1, 2000, 3200, dt, dt, log, h100, 8, True, False)  # 12 800 000 bytes: out
            assert P(*a) == off(*a) and P(*a) != lifted(*a)
            # narrow packs (8-byte) and float32 keep their plans
            a = (1, 2000, 1200, dt, dt, log, h100, 4, True, False)
            assert P(*a) == off(*a)
        a = (1, 2000, 1200, "float32", "float32", False, h100, 4, True, False)
        assert P(*a) == off(*a)


def test_cols_wide_rules():
    """_plan_cols_wide: plan_cols takes the whole-width split stream on sm_90
    for one dense slab of float16 / bfloat16 (same dtype out) whose rows are
    off the 16-byte grid, at each bound (bytes, row bytes, packs of the
    folded row, folded rows a block, the axis length of rows of
    COLS_WIDE_LONG_ROW_BYTES) and not one step past it; never on
    sm_80, non-dense or several slabs, float32, another output dtype, rows on
    the 16-byte grid or L not a multiple of the fold. The plan is of the
    reshaped problem (fold f, workspace of G x I f partials and I totals),
    and the compile-check enumeration lists its three kernels."""
    h100, a100 = _dispatch.DeviceInfo(132, 90), _dispatch.DeviceInfo(108, 80)
    names = _forward_names(h100)
    assert not any("wide" in k for k in _forward_names(a100))
    W = _dispatch._plan_cols_wide
    minb, minr = _dispatch.COLS_WIDE_MIN_BYTES, _dispatch.COLS_WIDE_MIN_ROW_BYTES
    G = h100.sm_count * _dispatch.COLS_WIDE_BLOCKS_PER_SM
    for dt in ("bfloat16", "float16"):
        for log in (False, True):
            for L, I in ((16000, 1500), (20000, 1100), (12000, 2500), (24000, 1502)):
                f = _dispatch.fold_factor(I, dt, dt)
                p = _dispatch.plan_cols(1, L, I, dt, dt, log, h100, 4 if I % 8 else 8, True, True)
                assert p.kernel.startswith("softmax_cols_wide_finish") and p.fold == f > 1, (dt, L, I, p)
                assert {p.pre_kernel, p.mid_kernel, p.kernel} <= names
                g, rpc, pf = p.extra
                assert pf == I * f * 2 // 16 and p.block == (-(-pf // 32) * 32,) and g * rpc >= L // f > (g - 1) * rpc
                assert p.grid == p.pre_grid == (g,) and g <= G and p.ws_elems == 2 * (g * I * f + I)
                assert p.mid_grid == (-(-I // 8),) and p.mid_block == (256,)
                assert _dispatch.plan_cols(1, L, I, dt, dt, log, h100, 4, False, True).mid_kernel is None
                assert _dispatch.plan_cols(1, L, I, dt, dt, log, a100, 4, True, True).mid_kernel is None
            # bytes: L x I x 2 at the bound and one row of 16-byte packs below (I = 1500: f = 2)
            L = -(-minb // (1500 * 2 * 2)) * 2
            assert W(1, L, 1500, dt, dt, False, h100, True) is not None
            assert W(1, L - 2, 1500, dt, dt, False, h100, True) is None
            # row bytes (I = 1026: 2052 bytes, f = 4; I = 1022: 2044 bytes)
            assert minr == 2048
            assert W(1, 16000, 1026, dt, dt, False, h100, True) is not None
            assert W(1, 16000, 1022, dt, dt, False, h100, True) is None
            # packs of the folded row: I = 4092 (f = 2) 1023 packs; I = 4100 (f = 2) 1025
            assert W(1, 10000, 4092, dt, dt, False, h100, True).block == (1024,)
            assert W(1, 10000, 4100, dt, dt, False, h100, True) is None
            # rows of COLS_WIDE_LONG_ROW_BYTES (I = 3300: 6600 bytes, f = 2) only from COLS_WIDE_LONG_ROW_MIN_L
            # rows; I = 3292 (6584 bytes, f = 2) at any length
            assert _dispatch.COLS_WIDE_LONG_ROW_BYTES == 6600 and _dispatch.COLS_WIDE_LONG_ROW_MIN_L == 8500
            assert W(1, 8500, 3300, dt, dt, False, h100, True) is not None
            assert W(1, 8498, 3300, dt, dt, False, h100, True) is None
            assert W(1, 8000, 3292, dt, dt, False, h100, True) is not None
            for log in (False, True):  # (6000, 3500): the skewed sync kernel instead
                p = _dispatch.plan_cols(1, 6000, 3500, dt, dt, log, h100, 4, True, True)
                assert p.sync and p.kernel.endswith(", false, true>"), p
            # folded rows a block (G x COLS_WIDE_MIN_ROWS); the bytes bound lifted
            lo = G * _dispatch.COLS_WIDE_MIN_ROWS * 2
            import unittest.mock as um
            with um.patch.object(_dispatch, "COLS_WIDE_MIN_BYTES", 0):
                assert W(1, lo, 3000 + 4, dt, dt, False, h100, True) is not None
                assert W(1, lo - 2, 3000 + 4, dt, dt, False, h100, True) is None
            for args in ((1, 16001, 1500, dt, dt), (2, 16000, 1500, dt, dt), (1, 16000, 1504, dt, dt),
                         (1, 16000, 1500, dt, "float32")):
                assert W(*args, False, h100, True) is None, args
    assert W(1, 16000, 1500, "float32", "float32", False, h100, True) is None  # (float32: 6000-byte rows, f = 1)
    assert W(1, 16000, 1501, "float32", "float32", False, h100, True) is None


def test_cols_split_fold_rules():
    """_plan_cols_split_fold: plan_cols takes the folded split stream on
    sm_90 for dense narrow-pack arrays that would otherwise stream split
    with narrow packs; never on non-dense slabs, where the
    folded sync kernel, a cluster or the skewed plan applies, or on sm_80.
    The plan is of the reshaped problem (L / f, I x f, 16-byte packs), its
    finish kernel is the FOLD instantiation, and the compile-check
    enumeration lists it."""
    h100, a100 = _dispatch.DeviceInfo(132, 90), _dispatch.DeviceInfo(108, 80)
    names = _forward_names(h100)
    # (float16 (16384, 1500) takes the whole-width stream: test_cols_wide_rules)
    for dt, L, I, f in (("float32", 16384, 1001, 4), ("float32", 16384, 1002, 2), ("bfloat16", 16384, 1001, 8),
                        ("float16", 16384, 1001, 8), ("bfloat16", 8192, 4095, 8), ("float32", 8000, 1001, 4),
                        ("bfloat16", 6000, 3001, 8)):
        vec = _dispatch._pack_elems(dt, dt)
        while I % vec:
            vec //= 2
        for log in (False, True):
            # (rows not skewed alike: with skew, the skewed sync plan takes most of these shapes)
            p = _dispatch.plan_cols(1, L, I, dt, dt, log, h100, vec, True, False)
            assert p.fold == f and p.pre_kernel and p.kernel.endswith(", true>"), (dt, L, I, p)
            assert p.kernel.startswith("softmax_cols_split_finish") and p.kernel in names and p.pre_kernel in names
            tx = p.extra[0]
            w = tx * _dispatch._pack_elems(dt, dt)
            assert p.grid[0] == -(-(I * f) // w), p  # tiles of the reshaped rows
            for dense, dev in ((False, h100), (True, a100)):
                q = _dispatch.plan_cols(1, L, I, dt, dt, log, dev, vec, dense, True)
                assert q.fold == 1 or not q.pre_kernel, (dense, dev, q)
    # L not a multiple of f: the narrow-pack split stream
    p = _dispatch.plan_cols(1, 16385, 1001, "float32", "float32", False, h100, 1, True, False)
    assert p.fold == 1 and p.pre_kernel and not p.kernel.endswith(", true>"), p
    # with skew, where the skewed sync plan does not apply (float16; too many splits)
    for dt, L, I in (("float16", 16384, 1001), ("float32", 30000, 1001), ("bfloat16", 16384, 1001)):
        p = _dispatch.plan_cols(1, L, I, dt, dt, False, h100, 1, True, True)
        assert p.pre_kernel and p.fold > 1, (dt, L, I, p)
    # the folded sync kernel and the skewed plan first where they apply
    assert _dispatch.plan_cols(1, 8000, 1001, "bfloat16", "bfloat16", False, h100, 1, True, True).kernel.startswith(
        "softmax_cols_sync")
    assert _dispatch.plan_cols(1, 1000, 5001, "bfloat16", "bfloat16", False, h100, 1, True, True).kernel.endswith(
        ", 1, true>")
    assert _dispatch._plan_cols_split_fold(1, 8001, 1001, "float32", "float32", False, h100) is None  # L % f
    assert _dispatch._plan_cols_split_fold(1, 8000, 1004, "float32", "float32", False, h100) is None  # f = 1


def test_cols_cl16_rule(monkeypatch):
    """plan_cols on sm_90: a same-dtype 16-bit array of at most
    COLS_CL16_MAX_BYTES, an axis of COLS_CL16_MIN_L .. COLS_CL16_MAX_L and
    rows on the 8- or 16-byte grid takes the cluster plan in clusters of 16
    (8-byte packs on the 16-byte grid, 16-byte ones at half the NR over
    COLS_CL16_MAX_NR; 4-byte packs on the 8-byte grid; the least NR that
    holds the axis; 32-byte tiles, then 64-byte ones, up to
    COLS_CL16_MAX_TILES, or up to COLS_CL16_LONG_OFF_SECTOR_TILES of 32
    bytes for axes of COLS_CL16_LONG_MIN_L rows and more off the sector
    grid), with the plan without the rule as its fallback; larger arrays,
    shorter or longer axes, more tiles, higher NR, narrower rows, float32,
    mixed dtypes and sm_80 do not. The enumeration's probes give every kernel the rule picks over a scan, and
    those are in the compile-check enumeration. (Without the 16-lane rule,
    COLS_CL16_LANES, which takes some of these axes: test_cols_cl16_lanes_rule.)"""
    monkeypatch.setattr(_dispatch, "COLS_CL16_LANES", False)
    h100, a100 = _dispatch.DeviceInfo(132, 90, 232448), _dispatch.DeviceInfo(108, 80, 167936)
    names = _forward_names(h100)
    P, base = _dispatch.plan_cols, _dispatch._plan_cols_base

    def shape(p):  # (pack elements, NR, tile bytes / 2)
        return int(p.kernel.split(", ")[3]), p.extra[3], p.extra[0] * int(p.kernel.split(", ")[3])

    # (L, I, vec) -> (pack, NR, tile elements): the A/B's cases (kernels/cl16.txt)
    want = {(8000, 100, 4): (2, 16, 16), (8000, 300, 4): (2, 16, 16), (4000, 100, 4): (2, 8, 16),
            (12000, 160, 8): (8, 8, 16), (6000, 96, 8): (4, 8, 16), (8000, 64, 8): (4, 8, 16),
            (3000, 384, 8): (4, 8, 32), (6000, 384, 8): (8, 8, 32), (4000, 512, 8): (4, 8, 32),
            (3000, 640, 8): (4, 8, 32), (16000, 64, 8): (8, 8, 16), (2000, 64, 8): (4, 4, 16),
            (5000, 120, 8): (8, 8, 32), (5000, 40, 8): (4, 8, 16),  # (the last two: rows off the sector grid)
            (16000, 200, 8): (8, 8, 16), (8193, 88, 8): (8, 8, 16)}  # (long axes off it: COLS_CL16_LONG_*)
    for dt in ("float16", "bfloat16"):
        for log in (False, True):
            for (L, I, vec), sh in want.items():
                a = (1, L, I, dt, dt, log, h100, vec, True, (I * 2) % 16 != 0)
                p = P(*a)
                assert p.kernel.startswith("softmax_cols_cl<") and p.extra[1] == 16 and shape(p) == sh, (a, p)
                assert p.fallback == base(*a) and not p.sync and p.kernel in names, (a, p)
                assert _plan_cols_with(monkeypatch, "COLS_CL16_MAX_BYTES", 0, *a) == p.fallback
            for a in ((1, 2000, 1500, dt, dt, log, h100, 4),  # 94 tiles
                      (1, 3000, 768, dt, dt, log, h100, 8),  # 24 tiles of 64 bytes
                      (1, 4000, 500, dt, dt, log, h100, 4),  # 32 tiles of 32 bytes on the 8-byte grid
                      (1, 5000, 456, dt, dt, log, h100, 8),  # off the sector grid: 15 tiles of 64 bytes
                      (1, 10000, 256, dt, dt, log, h100, 8),  # 16-byte packs at NR 16
                      (1, 10000, 300, dt, dt, log, h100, 4),  # 4-byte packs at NR 32
                      (1, 8000, 512, dt, dt, log, h100, 8),  # over COLS_CL16_MAX_BYTES
                      (4, 4000, 256, dt, dt, log, h100, 8),  # ... over the slabs
                      (1, 16384, 216, dt, dt, log, h100, 8),  # long axis off the sector grid: 14 tiles of 32 bytes
                      (1, 1999, 64, dt, dt, log, h100, 8), (1, 16385, 64, dt, dt, log, h100, 8),  # axis bounds
                      (1, 8000, 102, dt, dt, log, h100, 2), (1, 8000, 101, dt, dt, log, h100, 1),  # narrow rows
                      (1, 8000, 100, dt, dt, log, a100, 4),  # sm_80: no clusters
                      (1, 8000, 100, dt, "float32", log, h100, 4)):  # mixed dtypes
                p = P(*a)
                assert p == base(*a) and not (p.kernel.startswith("softmax_cols_cl<") and p.extra[1] == 16), (a, p)
        assert P(1, 8000, 100, "float32", "float32", False, h100, 4) == base(1, 8000, 100, "float32", "float32",
                                                                            False, h100, 4)
    assert _dispatch.COLS_CL16_MAX_BYTES == 6_500_000 and _dispatch.COLS_CL16_MAX_NR == {4: 16, 8: 8, 16: 8}
    assert (_dispatch.COLS_CL16_LONG_MIN_L, _dispatch.COLS_CL16_LONG_OFF_SECTOR_TILES) == (8193, 13)
    # the probes' kernels are every kernel the rule picks over a scan
    for dt in ("float16", "bfloat16"):
        for log in (False, True):
            scan, probe = set(), set()
            for L in range(2000, 16385, 211):
                for I in range(4, 700, 4):
                    for vec in (8, 4):
                        p = _dispatch._choose_cols_cl16(1, L, I, dt, dt, log, h100, vec) if I % vec == 0 else None
                        if p is not None:
                            scan.add(p.kernel)
            for L, I in itertools.product(_dispatch.COLS_CL16_PROBE_L, _dispatch.COLS_CL16_PROBE_I):
                for vec in (8, 4, 2):
                    p = _dispatch._choose_cols_cl16(1, L, I, dt, dt, log, h100, vec) if I % vec == 0 else None
                    if p is not None:
                        probe.add(p.kernel)
            assert scan == probe and len(scan) == 6 and scan <= names, (dt, log, scan ^ probe)


def test_cols_cl16_lanes_rule(monkeypatch):
    """plan_cols on sm_90, the 16-lane rule (COLS_CL16_LANES): a same-dtype
    16-bit array of at most COLS_CL16_MAX_BYTES with an axis of
    COLS_CL16_LANES_MIN_L .. COLS_CL16_LANES_MAX_L takes softmax_cols_cl in
    clusters of 16 on tiles of 16 lanes (fewer where the rows are narrower):
    the narrowest pack of 1, 2, 4 elements (at most what the rows allow)
    whose grid has at most 2 x SMs blocks, at the least NR of 4 / 8 / 16
    that holds the axis; never NR 16 with 4-element packs, and where the
    older cl16 rule has a plan only NR 16 with 1-element packs (else that
    plan). The plan without either rule is the fallback. Shorter and longer
    axes, larger arrays, too many blocks, float32, mixed dtypes and sm_80 keep
    their plans, and every kernel the rule picks over a scan is in the
    compile-check enumeration."""
    h100, a100 = _dispatch.DeviceInfo(132, 90, 232448), _dispatch.DeviceInfo(108, 80, 167936)
    names = _forward_names(h100)
    P, base = _dispatch.plan_cols, _dispatch._plan_cols_base

    def shape(p):  # (pack elements, NR, lanes a row)
        return int(p.kernel.split(", ")[3]), p.extra[3], p.extra[0]

    # (O, L, I, vec) -> (pack, NR, lanes); the last two where the older cl16 rule has a plan
    want = {(1, 1000, 64, 8): (1, 4, 16), (1, 600, 96, 8): (1, 4, 16), (1, 1024, 64, 8): (1, 4, 16),
            (1, 1025, 64, 8): (1, 8, 16), (1, 1000, 300, 4): (2, 4, 16), (1, 1000, 1024, 8): (4, 4, 16),
            (1, 1500, 384, 8): (2, 8, 16), (1, 2000, 500, 4): (2, 8, 16), (1, 2000, 1000, 8): (4, 8, 16),
            (1, 4000, 500, 4): (2, 16, 16), (1, 900, 8, 8): (1, 4, 8), (2, 700, 48, 8): (1, 4, 16),
            (1, 1000, 33, 1): (1, 4, 16), (1, 4000, 100, 4): (1, 16, 16), (1, 4096, 72, 8): (1, 16, 16)}
    for dt in ("float16", "bfloat16"):
        for log in (False, True):
            for (O, L, I, vec), sh in want.items():
                a = (O, L, I, dt, dt, log, h100, vec, True, (I * 2) % 16 != 0)
                p = P(*a)
                assert p.kernel.startswith("softmax_cols_cl<") and p.extra[1] == 16 and shape(p) == sh, (a, p)
                assert p.fallback == base(*a) and p.kernel in names, (a, p)
                assert _dispatch._blocks(p) <= 2 * h100.sm_count, (a, p)
                off = _plan_cols_with(monkeypatch, "COLS_CL16_LANES", False, *a)
                assert off != p and off.fallback in (None, p.fallback), (a, off)
            for a in ((1, 599, 64, dt, dt, log, h100, 8), (1, 4097, 64, dt, dt, log, h100, 8),  # axis bounds
                      (1, 3000, 640, dt, dt, log, h100, 8),  # NR 16 with 4-element packs
                      (1, 2000, 100, dt, dt, log, h100, 4), (1, 2000, 64, dt, dt, log, h100, 8),  # cl16 at NR 8
                      (1, 1000, 1500, dt, dt, log, h100, 4),  # 384 blocks
                      (1, 4000, 1024, dt, dt, log, h100, 8),  # over COLS_CL16_MAX_BYTES
                      (1, 1000, 64, dt, dt, log, a100, 8),  # sm_80: no clusters
                      (1, 1000, 64, dt, "float32", log, h100, 4)):  # mixed dtypes
                p = P(*a)
                assert p == _plan_cols_with(monkeypatch, "COLS_CL16_LANES", False, *a), (a, p)
                assert not (p.kernel.startswith("softmax_cols_cl<") and p.extra[1] == 16 and p.extra[0] == 16), (a, p)
    assert P(1, 1000, 64, "float32", "float32", False, h100, 4) == base(1, 1000, 64, "float32", "float32", False,
                                                                        h100, 4)
    # every kernel the rule picks over a scan is enumerated
    for dt in ("float16", "bfloat16"):
        for log in (False, True):
            scan = set()
            for L in range(600, 4097, 97):
                for I in list(range(1, 1100, 13)) + [64, 256, 1024]:
                    for vec in (8, 4, 2, 1):
                        if I % vec == 0:
                            c16 = _dispatch._choose_cols_cl16(1, L, I, dt, dt, log, h100, vec)
                            p = _dispatch._choose_cols_cl16_lanes(1, L, I, dt, dt, log, h100, vec, c16)
                            if p is not None:
                                scan.add(p.kernel)
            assert len(scan) == 8 and scan <= names, (dt, log, scan - names)
