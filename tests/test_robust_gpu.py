"""Trustworthy under real use (GPU): CUDA graphs and streams, no host
synchronisation, 8 threads making first calls at once, devices, interop
(torch, JAX), bad input, memory, an unusable kernel cache, launch errors.

Parametrised over every public operation (``_ops.ALL_OPS``); operations that
do not exist yet are skipped with a reason.
"""
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import replace

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # JAX: don't take 75% of the GPU

import numpy as np
import pytest

import cusoftmax
from cusoftmax import _dispatch, _loader

from _check import (apply_view, check_forward, clear_caches, host, plan_of, random_values,
                    real_device_info)
from _ops import ALL_OPS, Forward, regime_cases
from _util import np_dtype

pytestmark = pytest.mark.gpu
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _need(op):
    if not op.available():
        pytest.skip(op.skip_reason())


def _gpu(h):
    import cupy
    return {k: cupy.asarray(v) for k, v in h.items()}


def _settle():
    """Wait for the device: the inputs' host-to-device copies and the warm-up
    call ran on the legacy default stream, which the tests' non-blocking
    capture streams do not wait for. Without this, a copy still queued there
    (a busy GPU delays it) can land after a replay's own copies and the replay
    reads the old inputs (seen on a shared H200: y from the first seed, dy
    from the second)."""
    import cupy
    cupy.cuda.Device().synchronize()


def _cases(op):
    """(id, shape, axis) per regime of ``op`` on this GPU, plus for the
    forward the cols and copy layouts."""
    dev = real_device_info()
    out = [(f"{reg}", (R, L), -1) for reg, (R, L) in sorted(regime_cases(op, dev).items())]
    if op.family in ("forward", "backward"):
        out.append(("cols", (16, 50, 33), 1))
        out.append(("copy", (8, 9, 10), (0, 2)))
    return out


def _op_cases():
    """Every (op, case) pair; computed lazily since planning needs the GPU."""
    try:
        dev = real_device_info()
    except Exception:
        return [pytest.param(op, None, id=f"{op.name}") for op in ALL_OPS]
    del dev
    params = []
    for op in ALL_OPS:
        if not op.available():
            params.append(pytest.param(op, None, id=f"{op.name}-missing"))
            continue
        for cid, shape, axis in _cases(op):
            params.append(pytest.param(op, (shape, axis), id=f"{op.name}-{cid}"))
    return params


def _ids_safe_params():
    from _util import HAS_GPU
    if not HAS_GPU:
        return [pytest.param(op, None, id=op.name) for op in ALL_OPS]
    return _op_cases()


OP_CASES = _ids_safe_params()


# ----------------------------------------------------------------------------
# Memory: pool allocations during a call
# ----------------------------------------------------------------------------
def _hook_class():
    import cupy

    class Recorder(cupy.cuda.MemoryHook):
        """Live bytes taken from CuPy's pool inside the ``with`` block, its
        peak, and every allocation (size, freed?)."""
        name = "CusoftmaxRecorder"

        def __init__(self):
            self.live, self.cur, self.peak, self.allocs = {}, 0, 0, []

        def malloc_postprocess(self, **kw):
            self.live[kw["mem_ptr"]] = kw["mem_size"]
            self.cur += kw["mem_size"]
            self.peak = max(self.peak, self.cur)
            self.allocs.append([kw["mem_size"], False])

        def free_postprocess(self, **kw):
            size = self.live.pop(kw["mem_ptr"], None)
            if size is not None:
                self.cur -= size
                for a in self.allocs:
                    if a[0] == size and not a[1]:
                        a[1] = True
                        break

    return Recorder


def _round(n):
    return -(-n // 512) * 512


def _ws_bound(R):
    """O(rows x splits): 2 values of 8 bytes per (row, split), splits <=
    SPLIT_BLOCKS_PER_SM x SMs / rows + 1, rounded up by the pool; a few
    small workspaces of that size."""
    sms = real_device_info().sm_count
    splits = -(-getattr(_dispatch, "SPLIT_BLOCKS_PER_SM", 8) * sms // max(R, 1)) + 1
    return 4 * _round(16 * R * splits)


@pytest.mark.parametrize("op,case", OP_CASES)
def test_memory_no_temporaries(op, case):
    """The pool's peak during a call is the output plus at most an
    O(rows x splits) workspace; the copy layout (non-mergeable strides,
    documented) may add one contiguous copy of x and of the result."""
    _need(op)
    import cupy
    shape, axis = case
    h = op.make_inputs(np.random.default_rng(0), shape, "float32", axis)
    g = _gpu(h)
    op.call(g, axis)  # warm: compile, plan, pool blocks
    cupy.cuda.Device().synchronize()
    rec = _hook_class()()
    with rec:
        res = op.call(g, axis)
    outs = sum(_round(a.nbytes) for a in op.outputs(res))
    R = int(np.prod(shape)) // (shape[-1] if axis == -1 else 1)
    allowed = outs + _ws_bound(R)
    if op.family == "topk":  # partial candidates: O(rows x splits x k)
        allowed += _ws_bound(R) * (op.k_for(shape, axis) + 1)
    regime = plan_of(g["x"], axis) if op.family == "forward" else "?"
    if regime.startswith("copy") or (op.family != "forward" and axis == (0, 2)):
        allowed += 2 * _round(int(np.prod(shape)) * 8)  # documented: contiguous copies
    assert rec.peak <= allowed, (f"{op.name} {shape} axis={axis} ({regime}): peak {rec.peak} B of pool "
                                 f"memory, allowed {allowed} (outputs {outs})")


# ----------------------------------------------------------------------------
# CUDA graphs: capture, replay on new input values
# ----------------------------------------------------------------------------
@pytest.mark.parametrize("op,case", OP_CASES)
def test_graph_capture_replay(op, case):
    """Each operation captured in a CUDA graph (workspaces and outputs
    allocated during capture); replays read new values written into the
    captured input buffers. A capture fails on any host synchronisation, so
    this also proves the call never synchronises."""
    _need(op)
    import cupy
    shape, axis = case
    rng = np.random.default_rng(1)
    h = op.make_inputs(rng, shape, "float32", axis)
    g = _gpu(h)
    op.call(g, axis)  # warm up outside the capture
    _settle()
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        try:
            res = op.call(g, axis)
        finally:
            graph = stream.end_capture()
    for seed in (2, 3):
        h2 = op.make_inputs(np.random.default_rng(seed), shape, "float32", axis)
        with stream:
            for k, v in h2.items():
                g[k].set(v, stream=stream)
            graph.launch(stream)
        stream.synchronize()
        op.check(res, h2, axis, ctx=f"graph replay {op.name} {shape} seed {seed}")


@pytest.mark.parametrize("op,case", OP_CASES)
def test_graph_temporaries_not_reused_after_capture(op, case):
    """Temporaries a call frees during capture (the split workspace, copy
    buffers) go back to CuPy's pool while the graph still uses them: arrays
    allocated after the capture must not be overwritten by a replay."""
    _need(op)
    import cupy
    shape, axis = case
    h = op.make_inputs(np.random.default_rng(4), shape, "float32", axis)
    g = _gpu(h)
    op.call(g, axis)
    _settle()
    stream = cupy.cuda.Stream(non_blocking=True)
    rec = _hook_class()()
    with stream:
        with rec:
            stream.begin_capture()
            try:
                res = op.call(g, axis)
            finally:
                graph = stream.end_capture()
        freed = [size for size, was_freed in rec.allocs if was_freed]
        if not freed:
            pytest.skip("no temporaries in this case")
        canaries = [cupy.full(size // 4, 12345.0, dtype=cupy.float32) for size in freed]
        graph.launch(stream)
    stream.synchronize()
    for c, size in zip(canaries, freed):
        bad = int(cupy.count_nonzero(c != 12345.0))
        assert bad == 0, (f"{op.name} {shape} axis={axis}: a graph replay overwrote {bad} values of an "
                          f"array allocated after the capture (a {size}-byte temporary freed during "
                          "capture was handed out again)")
    op.check(res, h, axis, ctx="after canary replay")


def test_graph_capture_of_several_ops_in_one_graph():
    import cupy
    ops = [op for op in ALL_OPS if op.available()]
    shape = (33, 777)
    hs = [op.make_inputs(np.random.default_rng(i), shape, "float32") for i, op in enumerate(ops)]
    gs = [_gpu(h) for h in hs]
    for op, g in zip(ops, gs):
        op.call(g)
    _settle()
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        res = [op.call(g) for op, g in zip(ops, gs)]
        graph = stream.end_capture()
        graph.launch(stream)
    stream.synchronize()
    for op, r, h in zip(ops, res, hs):
        op.check(r, h, -1, ctx=f"one graph: {op.name}")


# ----------------------------------------------------------------------------
# No host synchronisation: a call returns while the GPU is still busy
# ----------------------------------------------------------------------------
_SPIN = r"""
extern "C" __global__ void cusoftmax_test_spin(long long cycles) {
  long long t0 = clock64();
  while (clock64() - t0 < cycles) { }
}
"""


@pytest.mark.parametrize("op,case", OP_CASES)
def test_no_host_synchronisation(op, case):
    """With a 300 ms kernel queued ahead on the current stream, a (warm)
    call returns in far less: it queues its work and never waits."""
    _need(op)
    import cupy
    shape, axis = case
    h = op.make_inputs(np.random.default_rng(5), shape, "float32", axis)
    g = _gpu(h)
    op.call(g, axis)
    cupy.cuda.Device().synchronize()
    spin = cupy.RawKernel(_SPIN, "cusoftmax_test_spin")
    clock_khz = cupy.cuda.runtime.deviceGetAttribute(cupy.cuda.runtime.cudaDevAttrClockRate, 0)
    spin((1,), (1,), (np.int64(clock_khz * 300),))  # ~300 ms at the boost clock, longer below
    t0 = time.perf_counter()
    res = op.call(g, axis)
    dt = time.perf_counter() - t0
    busy = not cupy.cuda.get_current_stream().done
    cupy.cuda.get_current_stream().synchronize()
    assert busy and dt < 0.1, f"{op.name} {shape}: the call took {dt * 1e3:.0f} ms behind a busy GPU"
    op.check(res, h, axis)


# ----------------------------------------------------------------------------
# Threads: cold caches, 8 threads at once
# ----------------------------------------------------------------------------
def test_threads_first_calls_compile_once(monkeypatch):
    import cupy
    ops = [op for op in ALL_OPS if op.available()]
    dts = ("float32", "float16", "bfloat16", "float64")
    clear_caches()
    monkeypatch.setattr(_loader, "_kernels", {})
    counts: dict = {}
    lock = threading.Lock()
    real = _loader._compile_kernel

    def counting(source, name, dev):
        with lock:
            counts[(source, name, dev)] = counts.get((source, name, dev), 0) + 1
        return real(source, name, dev)

    monkeypatch.setattr(_loader, "_compile_kernel", counting)
    n = 8
    barrier = threading.Barrier(n)
    errors = []
    shared = (48, 1500)

    def work(i):
        try:
            rng = np.random.default_rng(100 + i)
            # a case every thread shares (same kernels compiled concurrently)
            # and a fresh one per thread (its own op, dtype and shape)
            mine = [(ops[0], shared, "float32"), (ops[i % len(ops)], (3 + i, 700 + 97 * i), dts[i % 4]),
                    (ops[(i + 1) % len(ops)], (1 + i, 20000 + 1001 * i), dts[(i + 1) % 4])]
            inputs = [(op, op.make_inputs(rng, shp, dt)) for op, shp, dt in mine]
            gpu_inputs = [(op, h, _gpu(h)) for op, h in inputs]
            cupy.cuda.Device().synchronize()
            barrier.wait()
            results = [(op, h, op.call(g)) for op, h, g in gpu_inputs]
            cupy.cuda.get_current_stream().synchronize()
            for op, h, r in results:
                op.check(r, h, -1, ctx=f"thread {i} {op.name}")
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append((i, repr(e)))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not errors, errors
    assert counts, "nothing was compiled: caches were not cold"
    twice = {k: v for k, v in counts.items() if v != 1}
    assert not twice, f"kernels compiled more than once: {twice}"


# ----------------------------------------------------------------------------
# Devices
# ----------------------------------------------------------------------------
def _two_gpus():
    import cupy
    if cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs 2 GPUs (this machine has one)")


@pytest.mark.parametrize("op", ALL_OPS, ids=lambda o: o.name)
def test_runs_on_the_input_device(op):
    _need(op)
    _two_gpus()
    import cupy
    h = op.make_inputs(np.random.default_rng(6), (40, 3000), "float32")
    with cupy.cuda.Device(1):
        g = _gpu(h)
    with cupy.cuda.Device(0):
        res = op.call(g)
        assert cupy.cuda.runtime.getDevice() == 0
    for a in op.outputs(res):
        assert a.device.id == 1
    with cupy.cuda.Device(1):
        op.check(res, h)


def test_inputs_on_different_devices_raise():
    _two_gpus()
    import cupy
    x = cupy.ones((4, 5), cupy.float32)
    with cupy.cuda.Device(1):
        other = cupy.ones((4, 5), cupy.float32)
    with pytest.raises(ValueError, match="device"):
        cusoftmax.softmax(x, out=other)
    if hasattr(cusoftmax, "softmax_backward"):
        with pytest.raises(ValueError, match="device"):
            cusoftmax.softmax_backward(x, other)


# ----------------------------------------------------------------------------
# Interop: torch and JAX arrays in, no copy; results back through DLPack
# ----------------------------------------------------------------------------
def _torch():
    torch = pytest.importorskip("torch", reason="torch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device")
    return torch


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("layout", ["c", "t"])
def test_torch_zero_copy(dtype, layout):
    torch = _torch()
    import cupy
    from cusoftmax._arrays import as_cupy
    xt = torch.randn(64, 1000, device="cuda", dtype=getattr(torch, dtype)) * 3
    if layout == "t":
        xt = xt.t()
    xc = as_cupy(xt)
    assert xc.data.ptr == xt.data_ptr(), "the tensor was copied"
    assert xc.shape == tuple(xt.shape) and xc.strides == tuple(s * xt.element_size() for s in xt.stride())
    y = cusoftmax.softmax(xt)
    assert isinstance(y, cupy.ndarray) and y.dtype == np_dtype(dtype)
    yt = torch.from_dlpack(y)  # hand the result back without a copy
    assert yt.data_ptr() == y.data.ptr and yt.dtype == getattr(torch, dtype)
    torch.cuda.synchronize()
    xh = xt.float().cpu().numpy().astype(np_dtype(dtype))
    check_forward(y, xh, -1, False, ctx=f"torch {dtype} {layout}")
    ref = torch.softmax(xt.float(), -1)
    assert torch.allclose(yt.float(), ref, atol=1e-2 if dtype != "float32" else 1e-6)
    yl = cusoftmax.log_softmax(xt, dtype="float32")
    check_forward(yl, xh, -1, True, out_dtype="float32")


def test_torch_requires_grad_tensor_clear_error_or_works():
    torch = _torch()
    xt = torch.randn(4, 5, device="cuda", requires_grad=True)
    try:
        y = cusoftmax.softmax(xt)
    except (TypeError, RuntimeError, ValueError) as e:
        assert "grad" in str(e) or "detach" in str(e), str(e)
        return
    check_forward(y, xt.detach().cpu().numpy(), -1, False)


def test_torch_backward_and_topk_accept_tensors():
    torch = _torch()
    for op in ALL_OPS[2:]:
        if not op.available():
            continue
        h = op.make_inputs(np.random.default_rng(7), (16, 300), "float32")
        g = {k: torch.as_tensor(v, device="cuda") for k, v in h.items()}
        op.check(op.call(g), h, ctx=f"torch {op.name}")


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_jax_zero_copy(dtype):
    jax = pytest.importorskip("jax", reason="jax is not installed")
    try:
        gpus = jax.devices("gpu")
    except RuntimeError:
        gpus = []
    if not gpus:
        pytest.skip("JAX has no GPU backend here")
    import jax.numpy as jnp
    from cusoftmax._arrays import as_cupy
    xh = (np.random.default_rng(8).standard_normal((32, 500)) * 3).astype(np_dtype(dtype))
    xj = jax.device_put(jnp.asarray(xh), gpus[0])
    xj.block_until_ready()
    xc = as_cupy(xj)
    assert xc.data.ptr == xj.unsafe_buffer_pointer(), "the JAX array was copied"
    y = cusoftmax.softmax(xj)
    check_forward(y, xh, -1, False, ctx=f"jax {dtype}")
    back = jax.dlpack.from_dlpack(y)
    np.testing.assert_array_equal(np.asarray(back).astype(np.float32), host(y).astype(np.float32))


# ----------------------------------------------------------------------------
# Bad input: a clear exception naming the argument, never a CUDA error
# ----------------------------------------------------------------------------
def _bad_cases():
    """(id, op name, build() -> (args, kwargs), exception type, regex)."""
    import cupy
    from cusoftmax._arrays import AxisError

    def x(shape=(4, 5), dt="float32"):
        return cupy.ones(shape, dt)

    C = []
    for f in ("softmax", "log_softmax"):
        C += [
            (f"{f}-numpy", f, lambda: ((np.ones((2, 3)),), {}), TypeError, r"^x .*cupy\.asarray"),
            (f"{f}-list", f, lambda: (([1.0, 2.0],), {}), TypeError, r"^x .*cupy\.asarray"),
            (f"{f}-scalar", f, lambda: ((1.5,), {}), TypeError, r"^x .*cupy\.asarray"),
            (f"{f}-numpy-object", f, lambda: ((np.array([1, "a"], dtype=object),), {}), TypeError,
             r"^x .*host memory"),
            (f"{f}-bool", f, lambda: ((x(dt="bool"),), {}), TypeError, r"^x has dtype bool"),
            (f"{f}-complex", f, lambda: ((x(dt="complex64"),), {}), TypeError, r"^x has complex dtype"),
            (f"{f}-axis-range", f, lambda: ((x(),), {"axis": 2}), AxisError, r"axis 2 is out of bounds"),
            (f"{f}-axis-repeated", f, lambda: ((x(),), {"axis": (1, -1)}), ValueError, r"repeated axis"),
            (f"{f}-axis-float", f, lambda: ((x(),), {"axis": 1.0}), TypeError, r"^axis must be an integer"),
            (f"{f}-out-shape", f, lambda: ((x(),), {"out": x((5, 4))}), ValueError, r"^out has shape"),
            (f"{f}-out-dtype", f, lambda: ((x(),), {"out": x(dt="float64")}), TypeError, r"^out has dtype"),
            (f"{f}-out-numpy", f, lambda: ((x(),), {"out": np.ones((4, 5), np.float32)}), TypeError,
             r"^out must be a cupy\.ndarray"),
            (f"{f}-out-overlap", f, lambda: (lambda b: ((b[:, :5],), {"out": b[:, 1:]}))(x((4, 6))),
             ValueError, r"^out overlaps x"),
            (f"{f}-out-broadcast", f, lambda: ((x(),), {"out": cupy.broadcast_to(x((5,)), (4, 5))}),
             ValueError, r"^out (has a zero stride|overlaps)"),
            (f"{f}-empty-reduced", f, lambda: ((x((4, 0)),), {}), ValueError, r"empty axis"),
            (f"{f}-dtype-int", f, lambda: ((x(),), {"dtype": "int32"}), TypeError, r"^dtype=int32"),
            (f"{f}-algorithm", f, lambda: ((x(),), {"algorithm": "fast"}), ValueError, r"^algorithm="),
        ]
    for f in ("softmax_backward", "log_softmax_backward"):
        C += [
            (f"{f}-y-numpy", f, lambda: ((np.ones(3), x((3,))), {}), TypeError, r"^y .*cupy\.asarray"),
            (f"{f}-dy-numpy", f, lambda: ((x((3,)), np.ones(3)), {}), TypeError, r"^dy .*cupy\.asarray"),
            (f"{f}-shapes", f, lambda: ((x((4, 5)), x((4, 6))), {}), ValueError, r"\(4, 5\).*\(4, 6\)"),
            (f"{f}-bool", f, lambda: ((x(dt="bool"), x()), {}), TypeError, r"bool"),
            (f"{f}-axis-range", f, lambda: ((x(), x()), {"axis": 3}), AxisError, r"out of bounds"),
            (f"{f}-out-overlap", f, lambda: (lambda b: ((x(), b[:, :5]), {"out": b[:, 1:]}))(x((4, 6))),
             ValueError, r"^out overlaps"),
            (f"{f}-empty-reduced", f, lambda: ((x((4, 0)), x((4, 0))), {}), ValueError, r"empty axis"),
        ]
    f = "softmax_topk"
    C += [
        (f"{f}-numpy", f, lambda: ((np.ones((2, 3)), 1), {}), TypeError, r"^x .*cupy\.asarray"),
        (f"{f}-k-big", f, lambda: ((x(), 6), {}), ValueError, r"k=6 .*0 <= k <= 5"),
        (f"{f}-k-negative", f, lambda: ((x(), -1), {}), ValueError, r"k=-1"),
        (f"{f}-k-float", f, lambda: ((x(), 2.0), {}), TypeError, r"^k must be an integer"),
        (f"{f}-k-bool", f, lambda: ((x(), True), {}), TypeError, r"^k must be an integer"),
        (f"{f}-axis-tuple", f, lambda: ((x(), 1), {"axis": (0, 1)}), TypeError, r"axis"),
        (f"{f}-complex", f, lambda: ((x(dt="complex64"), 1), {}), TypeError, r"complex"),
        (f"{f}-algorithm", f, lambda: ((x(), 1), {"algorithm": "fast"}), ValueError, r"algorithm="),
    ]
    return C


def _bad_params():
    from _util import HAS_GPU
    if not HAS_GPU:
        return [pytest.param(None, id="no-gpu")]
    return [pytest.param(c, id=c[0]) for c in _bad_cases()]


_observed: list = []


@pytest.mark.parametrize("case", _bad_params())
def test_bad_input(case):
    cid, fname, build, exc, rx = case
    if not hasattr(cusoftmax, fname):
        pytest.skip(f"cusoftmax.{fname} does not exist yet")
    args, kw = build()
    from cupy_backends.cuda.api.driver import CUDADriverError
    from cupy_backends.cuda.api.runtime import CUDARuntimeError
    with pytest.raises(Exception) as ei:
        getattr(cusoftmax, fname)(*args, **kw)
    e = ei.value
    _observed.append({"case": cid, "op": fname, "type": type(e).__name__, "message": str(e)})
    _dump_observed()
    assert not isinstance(e, (CUDADriverError, CUDARuntimeError)), f"a CUDA error: {e}"
    assert isinstance(e, exc), f"{type(e).__name__}: {e}"
    import re
    assert re.search(rx, str(e)), f"message {str(e)!r} does not match {rx!r}"


def _dump_observed():
    path = os.environ.get("CUSOFTMAX_ERRORS_JSON")
    if path:
        with open(path, "w") as f:
            json.dump(_observed, f, indent=1)


@pytest.mark.parametrize("op", ALL_OPS, ids=lambda o: o.name)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_misaligned_views_correct(op, dtype):
    """x[1:] and odd element offsets: correct results, no error."""
    _need(op)
    import cupy
    R, L = 5, 1001
    h = op.make_inputs(np.random.default_rng(9), (R + 1, L), dtype)
    g = _gpu(h)
    for view in (lambda a: a[1:], lambda a: a.reshape(-1)[3:3 + R * L].reshape(R, L),
                 lambda a: a.reshape(-1)[1:1 + (R * L - 1)].reshape(-1)):
        gv = {k: view(v) for k, v in g.items()}
        hv = {k: view(v) for k, v in h.items()}
        op.check(op.call(gv), hv, ctx=f"{op.name} misaligned {dtype}")
    del cupy


@pytest.mark.parametrize("op", ALL_OPS, ids=lambda o: o.name)
def test_zero_size(op):
    _need(op)
    import cupy
    h = op.make_inputs(np.random.default_rng(10), (0, 7), "float32")
    res = op.call(_gpu(h))
    for a in op.outputs(res):
        assert isinstance(a, cupy.ndarray) and a.size == 0


# ----------------------------------------------------------------------------
# Launch errors: a CUDA error at launch names the operation and shape
# ----------------------------------------------------------------------------
def test_launch_error_reported_with_operation_and_shape(monkeypatch):
    import cupy
    real = _dispatch.plan_rows

    def bad_plan(*a, **k):
        return replace(real(*a, **k), block=(2048,))  # > 1024 threads: cudaErrorInvalidValue

    monkeypatch.setattr(_dispatch, "plan_rows", bad_plan)
    clear_caches()
    x = cupy.asarray(np.random.default_rng(11).standard_normal((6, 100)).astype(np.float32))
    try:
        with pytest.raises(RuntimeError) as ei:
            cusoftmax.log_softmax(x)
    finally:
        monkeypatch.setattr(_dispatch, "plan_rows", real)
        clear_caches()
    msg = str(ei.value)
    assert msg.startswith("cusoftmax.log_softmax:") and "6 rows of 100 elements" in msg, msg
    # not a sticky error: the next call works
    check_forward(cusoftmax.log_softmax(x), host(x), -1, True)


# ----------------------------------------------------------------------------
# An unwritable or corrupted CuPy kernel cache directory
# ----------------------------------------------------------------------------
_PROBE = textwrap.dedent(r"""
    import json, sys, warnings
    import numpy as np, cupy, cusoftmax
    warnings.simplefilter("always")
    with warnings.catch_warnings(record=True) as w:
        xh = np.random.default_rng(0).standard_normal((4, 300)).astype(np.float32)
        x = cupy.asarray(xh)
        y = cusoftmax.softmax(x).get()
        yl = cusoftmax.log_softmax(x).get()
    e = np.exp(xh - xh.max(-1, keepdims=True)); ref = e / e.sum(-1, keepdims=True)
    ok = bool(np.allclose(y, ref, rtol=1e-5, atol=1e-8) and np.allclose(yl, np.log(ref), atol=1e-5))
    msgs = [str(m.message) for m in w if "kernel cache" in str(m.message)]
    print(json.dumps({"ok": ok, "warnings": msgs}))
""")


def _probe(cache_dir):
    env = dict(os.environ, CUPY_CACHE_DIR=str(cache_dir), PYTHONPATH=ROOT)
    env.pop("CUPY_CACHE_IN_MEMORY", None)
    r = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, env=env,
                       timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-4000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_unwritable_cache_dir():
    """/proc/self is a directory nobody (not even root) can create files in."""
    out = _probe("/proc/self")
    assert out["ok"] and len(out["warnings"]) == 1, out


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root ignores permissions")
def test_read_only_cache_dir(tmp_path):
    d = tmp_path / "ro"
    d.mkdir()
    d.chmod(0o555)
    try:
        out = _probe(d)
    finally:
        d.chmod(0o755)
    assert out["ok"] and len(out["warnings"]) == 1, out


def _entries(d):
    return [p for p in d.iterdir() if p.is_file() and not p.name.endswith(".cu")]


def test_corrupted_cache_entries(tmp_path):
    """Garbage cache files (hash mismatch) are recompiled by CuPy silently;
    entries whose hash is valid but whose binary does not load, and entries
    that are directories, cost one warning."""
    import hashlib
    d = tmp_path / "cache"
    d.mkdir()
    assert _probe(d)["ok"]
    files = _entries(d)
    assert files, "CuPy wrote no cache entries"
    # 1. random bytes: CuPy's own hash check catches them
    for p in files:
        p.write_bytes(os.urandom(200))
    out = _probe(d)
    assert out["ok"], out
    # 2. a valid hash over a payload whose binary is garbage
    magic = b"\x93CUPYNE\x00"
    for p in _entries(d):
        data = p.read_bytes()[40:]
        if data.startswith(magic):
            n = int.from_bytes(data[8:12], "little")
            pos = 12
            for _ in range(n):
                pos += 4 + int.from_bytes(data[pos:pos + 4], "little")
            payload = data[:pos] + b"\x7fELF" + os.urandom(300)
        else:
            payload = b"\x7fELF" + os.urandom(300)
        p.write_bytes(hashlib.sha1(payload).hexdigest().encode() + payload)
    out = _probe(d)
    assert out["ok"] and len(out["warnings"]) <= 1, out
    # 3. every entry a directory
    for p in _entries(d):
        p.unlink()
        p.mkdir()
    out = _probe(d)
    assert out["ok"] and len(out["warnings"]) == 1, out


# ----------------------------------------------------------------------------
# Fuzz regressions (tools/fuzz.py)
# ----------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("seed,case", [(3, 1948)])
def test_fuzz_case_replays_clean(seed, case):
    """Replay a case the differential fuzzer once reported. Seed 3 case 1948
    (log_softmax_backward, bfloat16 rows read with step 2, fresh ``out=``):
    the gradient was right, but one element legitimately rounded to 7.5, the
    harness's ``out=`` sentinel, and the harness's context check (a CuPy call
    that does not exist) then stopped the run. Both are fixed in the harness;
    the case must pass."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run([sys.executable, os.path.join(root, "tools", "fuzz.py"), "--seed", str(seed),
                        "--case", str(case)], cwd=root, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "0 failures" in r.stdout, r.stdout[-3000:]


# ----------------------------------------------------------------------------
# rowsync: a refused cooperative launch runs the two-kernel split instead
# ----------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("log", [False, True])
def test_rowsync_refused_cooperative_launch_runs_split(monkeypatch, log):
    """softmax_rowsync's blocks wait for each other, so it is launched
    cooperatively; where the driver refuses (the grid does not fit on the
    SMs this context may use: another process, an MPS limit) the split
    fallback must give the same, correct result, not hang or raise."""
    import cupy
    from cusoftmax import _launch

    rng = np.random.default_rng(7)
    xh = (rng.standard_normal((2, 40001)) * 4).astype(np.float32)
    x = cupy.asarray(xh)
    assert plan_of(x, -1, log=log) == "rowsync"
    fn = cusoftmax.log_softmax if log else cusoftmax.softmax
    calls = []

    def refuse(*args):
        calls.append(args)
        return _launch._COOP_TOO_LARGE

    monkeypatch.setattr(_launch, "_coop_launch", refuse)
    clear_caches()
    for out in (None, cupy.full(x.shape, cupy.nan, cupy.float32)):  # the fast path and out=
        y = fn(x, out=out)
        check_forward(y, xh, -1, log, ctx="rowsync refused -> split")
    assert len(calls) == 2


@pytest.mark.gpu
@pytest.mark.parametrize("dtypes", [("float64", "float16"), ("float32", "float32")])
def test_rowsync_row_counts_in_turn(dtypes):
    """softmax_rowsync keeps its row counters and its partials in one
    per-stream workspace, zeroed once: launches of different row counts in
    turn (1 row, the most rows it takes, and between) must each be right and
    leave the counters at zero. With a counter region of 8 x rows bytes, a
    1-row launch left partials at byte 256, where a later 33-row launch (H100:
    132 SMs / 4) counted row 32, which then passed its barrier early (the
    wrong normaliser for 4096 of that row's elements, seen once in the
    suite's test_rows_at_thresholds)."""
    import cupy
    from cusoftmax import _launch

    tin, tout = dtypes
    dev = real_device_info()
    most = dev.sm_count // _dispatch.ROWSYNC_MIN_BLOCKS
    L = 28672
    rng = np.random.default_rng(3)
    counts = [1, most, 2, most, max(1, most // 2), 1, most]
    stream = cupy.cuda.get_current_stream()
    for i, R in enumerate(counts):
        xh = (rng.standard_normal((R, L)) * 2 + 1).astype(np_dtype(tin))
        x = cupy.asarray(xh)
        assert plan_of(x, -1, dtype=tout) == "rowsync", (R, L)
        y = cusoftmax.softmax(x, dtype=tout)
        ctx = f"rowsync call {i}: {R} rows after {counts[:i]}"
        check_forward(y, xh, -1, False, out_dtype=tout, ctx=ctx)
        # the launch's row counters (2 x 4 bytes a row from the workspace's
        # start, in either layout) are back at zero: a stale count lets a
        # barrier pass early, which only sometimes shows in the results
        stream.synchronize()
        ws = _launch._sync_ws[("rowsync", x.data.device_id, stream.ptr)]
        nz = cupy.flatnonzero(ws[:8 * R]).get()
        assert nz.size == 0, f"{ctx}: row counters left non-zero at bytes {nz[:8].tolist()}"
