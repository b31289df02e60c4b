"""Internal launcher: device properties, plan cache and kernel launches.

The public functions in ``_api`` validate arguments once per distinct call
signature; the result (a ``_Prepared`` entry holding the kernel handles, grid,
block and the scalar arguments) is cached, so a repeated call costs a dict
lookup, an allocation and one or two launches.
"""
from __future__ import annotations

import threading

import numpy


from ._dispatch import DeviceInfo, LaunchPlan, _cdiv
from ._loader import get_kernel

_devinfo: dict[int, DeviceInfo] = {}
_dev_lock = threading.Lock()


def device_info(device_id: int) -> DeviceInfo:
    """Cached :class:`DeviceInfo` of a CUDA device."""
    info = _devinfo.get(device_id)
    if info is None:
        import cupy

        with _dev_lock:
            rt = cupy.cuda.runtime
            info = DeviceInfo(
                sm_count=rt.deviceGetAttribute(rt.cudaDevAttrMultiProcessorCount, device_id),
                cc=int(cupy.cuda.Device(device_id).compute_capability),
                smem_block=rt.deviceGetAttribute(rt.cudaDevAttrMaxSharedMemoryPerBlockOptin, device_id))
            _devinfo[device_id] = info
    return info


def _cuda_errors() -> tuple:
    """Exception types a CUDA launch raises (CuPy's driver/runtime errors)."""
    try:
        from cupy_backends.cuda.api.driver import CUDADriverError
        from cupy_backends.cuda.api.runtime import CUDARuntimeError
    except ImportError:  # pragma: no cover - no CuPy: nothing launches anyway
        return ()
    return (CUDADriverError, CUDARuntimeError)


_CUDA_ERRORS = _cuda_errors()


def _op_label(plan: LaunchPlan) -> str:
    """Public operation a plan serves, read off its source and kernel name
    (a kernel's first boolean template argument is its LOG flag; later ones,
    such as softmax_cols_sync's PF or softmax_backward_stream's REV, are
    variants)."""
    base = plan.source.rsplit(".", 1)[0]
    args = plan.kernel.split("<", 1)[1].rstrip(">").split(", ") if "<" in plan.kernel else []
    flags = [a for a in args if a in ("true", "false")]
    return ("log_" if flags[:1] == ["true"] else "") + base


_cluster_fit: dict = {}


def _query_active_clusters(fn, cluster: int, threads: int, smem: int) -> int:
    """cuOccupancyMaxActiveClusters for ``fn`` in clusters of ``cluster``
    blocks (on the current device), or 0 where the driver cannot be asked."""
    import ctypes

    class _Cfg(ctypes.Structure):  # CUlaunchConfig
        _fields_ = [("gx", ctypes.c_uint), ("gy", ctypes.c_uint), ("gz", ctypes.c_uint),
                    ("bx", ctypes.c_uint), ("by", ctypes.c_uint), ("bz", ctypes.c_uint),
                    ("smem", ctypes.c_uint), ("stream", ctypes.c_void_p),
                    ("attrs", ctypes.c_void_p), ("nattrs", ctypes.c_uint)]

    try:
        lib = ctypes.CDLL("libcuda.so.1")
        out = ctypes.c_int(0)
        cfg = _Cfg(cluster, 1, 1, threads, 1, 1, smem, None, None, 0)
        if lib.cuOccupancyMaxActiveClusters(ctypes.byref(out), ctypes.c_void_p(fn.kernel.ptr),
                                            ctypes.byref(cfg)) == 0:
            return max(0, out.value)
    except Exception:  # noqa: BLE001 - no driver to ask
        pass
    return 0


def max_active_clusters(fn, cluster: int, threads: int, smem: int) -> int:
    """Clusters of ``fn`` the GPU can hold at once (cuOccupancyMaxActiveClusters).

    GPCs whose SM count is not a multiple of the cluster size leave SMs idle,
    so this is less than SMs / cluster (e.g. 30 clusters of 4 on a 132-SM H100).
    A persistent grid larger than this would run its last clusters alone.
    Falls back to 7/8 of SMs / cluster if the driver cannot be asked.
    """
    key = (fn.kernel.ptr if hasattr(fn, "kernel") else id(fn), cluster, threads, smem)
    n = _cluster_fit.get(key)
    if n is not None:
        return n
    n = _query_active_clusters(fn, cluster, threads, smem)
    if n <= 0:
        import cupy

        rt = cupy.cuda.runtime
        sms = rt.deviceGetAttribute(rt.cudaDevAttrMultiProcessorCount, cupy.cuda.runtime.getDevice())
        n = max(1, (sms // cluster) * 7 // 8)
    _cluster_fit[key] = n
    return n


def wide_clusters_fit(fn, plan: LaunchPlan, device_id: int) -> bool:
    """False where ``fn`` is built for clusters wider than the portable 8
    blocks and the GPU cannot hold one of them (the driver's answer; a driver
    that cannot be asked counts as no): the caller then runs the plan's
    fallback. True for every other kernel."""
    from ._loader import PORTABLE_CLUSTER, cluster_width

    width = cluster_width(fn)
    if width <= PORTABLE_CLUSTER:
        return True
    import cupy

    with cupy.cuda.Device(device_id):
        return _query_active_clusters(fn, width, plan.block[0], plan.smem) > 0


try:
    import cupy as _cupy
    from cupy_backends.cuda.api.driver import launchKernel as _drv_launch
    _current_stream = _cupy.cuda.get_current_stream
    _ndarray = _cupy.ndarray
    _get_device = _cupy.cuda.runtime.getDevice
except ImportError:  # pragma: no cover - no CuPy: as_cupy raises a clear error, nothing launches
    _cupy = _drv_launch = _current_stream = _get_device = None
    _ndarray = ()


_graph_keep: list = []


class _KeepAlive:
    """Allocator wrapper that never lets go of what it hands out."""

    def __init__(self, inner):
        self.inner = inner

    def __call__(self, nbytes):
        mp = self.inner(nbytes)
        _graph_keep.append(mp)
        return mp


def on_device(device_id: int):
    """Context making ``device_id`` current (a no-op when it already is)."""
    import contextlib

    if _get_device() == device_id:
        return contextlib.nullcontext()
    return _cupy.cuda.Device(device_id)


def capture_guard():
    """Context for the slow path of an operation (one with temporaries).

    While CuPy's current stream is capturing a CUDA graph, the graph keeps
    using every buffer the captured kernels touch, but CuPy returns freed
    temporaries (workspaces, layout copies) to its pool at once, where later
    allocations would get them and replays would overwrite them. So during a
    capture, allocations made by the operation are kept alive for the rest of
    the process (``_graph_keep``); otherwise this is a no-op.
    """
    import contextlib

    try:
        capturing = _current_stream().is_capturing()
    except Exception:  # noqa: BLE001 - no usable CUDA: nothing is captured
        capturing = False
    if not capturing:
        return contextlib.nullcontext()
    return _cupy.cuda.using_allocator(_KeepAlive(_cupy.cuda.get_allocator()))


class Params:
    """Kernel arguments packed once into a ctypes buffer of 8-byte slots (all
    the kernels take pointers and ``long long``s; an ``int`` parameter reads
    the low half of its slot, little-endian), plus the ``void*[]`` array that
    cuLaunchKernel takes. The pointer slots are rewritten per call under a
    lock: the driver copies the arguments before cuLaunchKernel returns."""
    __slots__ = ("vals", "ptrs", "addr", "lock", "describe")

    def __init__(self, args, describe: str = ""):
        import ctypes

        n = len(args)
        self.vals = (ctypes.c_int64 * n)(*[int(a) for a in args])
        base = ctypes.addressof(self.vals)
        self.ptrs = (ctypes.c_void_p * n)(*[base + 8 * i for i in range(n)])
        self.addr = ctypes.addressof(self.ptrs)
        self.lock = threading.Lock()
        self.describe = describe


_sync_ws: dict = {}
_sync_retired: list = []  # replaced (smaller) buffers: queued launches or captured graphs may use them
_sync_lock = threading.Lock()


def zeroed_workspace(device_id: int, stream_ptr: int, kind: str, nbytes: int) -> int:
    """Address of a zeroed workspace of at least ``nbytes`` for one kernel
    family ``kind`` and one (device, stream). Kernels that count blocks in
    it leave it at zero again, and launches on one stream run in order, so a
    stream reuses one buffer; different streams (which may run at once) and
    families get their own. Buffers are kept for the life of the process (a
    few KB per stream; CUDA graphs may replay launches that use them), also
    when a larger one replaces them."""
    key = (kind, device_id, stream_ptr)
    buf = _sync_ws.get(key)
    if buf is None or buf.nbytes < nbytes:
        with _sync_lock, on_device(device_id):
            buf = _sync_ws.get(key)
            if buf is None or buf.nbytes < nbytes:
                if buf is not None:
                    _sync_retired.append(buf)
                buf = _cupy.zeros(nbytes, numpy.uint8)
                _sync_ws[key] = buf
    return buf.data.ptr


def sync_workspace(device_id: int, stream_ptr: int) -> int:
    """The barrier workspace of ``softmax_rowsync`` (``zeroed_workspace``)."""
    buf = _sync_ws.get(("rowsync", device_id, stream_ptr))
    if buf is not None:
        return buf.data.ptr
    from ._dispatch import ROWSYNC_MAX_ROWS, ROWSYNC_WS_BYTES_PER_SM

    return zeroed_workspace(device_id, stream_ptr, "rowsync", 8 * ROWSYNC_MAX_ROWS
                            + ROWSYNC_WS_BYTES_PER_SM * device_info(device_id).sm_count)


_coop_fn = None
#: CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE: the grid cannot be resident at once.
_COOP_TOO_LARGE = 720


def folded_args(plan: LaunchPlan, L: int, I: int, sxl: int, syl: int) -> tuple:
    """(L, I, sxl, syl) of a dense slab as ``plan`` reads it: (L / fold,
    I x fold, unit-stride rows) where the plan folds, else unchanged."""
    f = plan.fold
    if f > 1:
        return L // f, I * f, I * f, I * f
    return L, I, sxl, syl


def _coop_launch(fptr, gx, gy, gz, bx, by, bz, smem, stream, params) -> int:
    """cuLaunchCooperativeKernel (CuPy has no binding): every block of the
    grid resident at once, or the launch is refused. Returns the CUresult."""
    global _coop_fn
    if _coop_fn is None:
        import ctypes

        f = ctypes.CDLL("libcuda.so.1").cuLaunchCooperativeKernel
        f.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p, ctypes.c_void_p]
        f.restype = ctypes.c_int
        _coop_fn = f
    return _coop_fn(fptr, gx, gy, gz, bx, by, bz, smem, stream, params)


class Launch:
    """A plan bound to compiled kernels on one device.

    A CUDA error raised by a launch (a sticky error left by earlier work, an
    invalid configuration, ...) is re-raised as ``RuntimeError`` naming the
    operation, the kernel and the problem size; the ``try`` costs nothing on
    the normal path.
    """
    __slots__ = ("plan", "fn", "pre_fn", "mid_fn", "grid", "block", "pre_grid", "extra", "ws_elems", "ws_dtype",
                 "op", "smem", "fptr", "dims", "sync", "device_id", "fallback", "cols_prm", "slab")

    def __init__(self, plan: LaunchPlan, device_id: int, op: str | None = None):
        import cupy

        fn = get_kernel(plan.source, plan.kernel, device_id)
        if plan.fallback is not None and not plan.sync and not wide_clusters_fit(fn, plan, device_id):
            plan = plan.fallback  # (clusters of 16 on a GPU that cannot hold one)
            fn = get_kernel(plan.source, plan.kernel, device_id)
        self.plan = plan
        self.op = op or _op_label(plan)
        self.fn = fn
        self.pre_fn = get_kernel(plan.source, plan.pre_kernel, device_id) if plan.pre_kernel else None
        self.mid_fn = get_kernel(plan.source, plan.mid_kernel, device_id) if plan.mid_kernel else None
        self.grid = plan.grid
        self.block = plan.block
        self.pre_grid = plan.pre_grid
        self.extra = plan.extra
        self.ws_elems = plan.ws_elems
        self.ws_dtype = numpy.dtype(plan.ws_dtype)
        self.smem = plan.smem
        self.sync = plan.sync
        self.slab = plan.kernel.startswith("softmax_cols_slab<")
        self.device_id = device_id
        self.cols_prm = {}  # softmax_cols_sync: Params per (O, L, I, strides)
        self.fallback = None  # Launch of plan.fallback, made if a cooperative launch is refused
        self.fptr = None
        try:  # function handles are per device
            ctx = cupy.cuda.Device(device_id)
            ctx.__enter__()
        except Exception:  # noqa: BLE001 - no usable CUDA (tests with stand-in kernels)
            ctx = None
        try:
            # opt in to the dynamic shared memory (> 48 KiB needs it); the
            # function is shared by every plan that uses the kernel: only raise
            if plan.smem and self.fn.max_dynamic_shared_size_bytes < plan.smem:
                self.fn.max_dynamic_shared_size_bytes = plan.smem
            if plan.cluster > 1 and ctx is not None:  # persistent clusters: only as many as fit
                fit = max_active_clusters(self.fn, plan.cluster, plan.block[0], plan.smem)
                self.grid = (max(1, min(plan.grid[0] // plan.cluster, fit)) * plan.cluster,)
            k = getattr(self.fn, "kernel", None)
            self.fptr = k.ptr if (k is not None and ctx is not None) else None
        finally:
            if ctx is not None:
                ctx.__exit__(None, None, None)
        g = tuple(self.grid) + (1, 1)
        b = tuple(self.block) + (1, 1)
        self.dims = (g[0], g[1], g[2], b[0], b[1], b[2], self.smem)

    def params(self, args) -> "Params | None":
        """A reusable parameter buffer for this launch (see :class:`Params`),
        or None where no direct launch is possible (then use rows/cols)."""
        if (self.fptr is None or _drv_launch is None or self.pre_fn is not None
                or (self.sync and self.plan.regime == "cols")):  # cols_sync: launch.cols
            return None
        return Params(tuple(args) + ((0,) if self.sync else ()))

    def fast(self, prm: "Params", xptr: int, yptr: int) -> None:
        """Launch the main kernel with ``prm``'s arguments, its first two
        (the pointers) replaced: one cuLaunchKernel on CuPy's current stream,
        no per-call argument conversion."""
        stream = _current_stream().ptr
        gx, gy, gz, bx, by, bz, sm = self.dims
        try:
            with prm.lock:
                v = prm.vals
                v[0] = xptr
                v[1] = yptr
                if not self.sync:
                    _drv_launch(self.fptr, gx, gy, gz, bx, by, bz, sm, stream, prm.addr, 0)
                    return
                v[len(v) - 1] = sync_workspace(self.device_id, stream)
                rc = _coop_launch(self.fptr, gx, gy, gz, bx, by, bz, sm, stream, prm.addr)
                R, L, sx, sy = v[2], v[3], v[4], v[5]
        except _CUDA_ERRORS as e:
            raise self._failed(e, prm.describe) from e
        if rc:
            self._sync_refused(rc, prm.describe).rows(xptr, yptr, R, L, sx, sy)

    def _sync_refused(self, rc, size) -> "Launch":
        """A refused cooperative launch: the split fallback to run instead
        (too large a grid for the SMs this context may use), else raise."""
        if rc != _COOP_TOO_LARGE or self.plan.fallback is None:
            raise RuntimeError(
                f"cusoftmax.{self.op}: cuLaunchCooperativeKernel failed (CUresult {rc}) for the "
                f"{self.plan.regime} kernel {self.plan.kernel} (grid {self.grid}, block {self.block}) "
                f"on {size}")
        if self.fallback is None:
            self.fallback = Launch(self.plan.fallback, self.device_id, self.op)
        return self.fallback

    def _failed(self, err: BaseException, size: str) -> RuntimeError:
        return RuntimeError(
            f"cusoftmax.{self.op}: CUDA error launching the {self.plan.regime} kernel "
            f"{self.plan.kernel} (grid {self.grid}, block {self.block}) on {size}: {err}. "
            "CUDA errors are sticky: an earlier kernel on this device may have caused it; "
            "rerun with CUDA_LAUNCH_BLOCKING=1 to locate it")

    def _cols_sync(self, xptr, yptr, O, L, I, sxo, sxl, syo, syl) -> None:
        """softmax_cols_sync: partials in a pool buffer, tile counters in the
        per-stream zeroed workspace, one cooperative launch; the split stream
        (the plan's fallback) where the driver refuses the grid."""
        tx, splits, tiles = self.extra[:3]
        stream = _current_stream().ptr
        part = _cupy.empty(self.ws_elems, self.ws_dtype)
        cnt = zeroed_workspace(self.device_id, stream, "colsync", (8 * tiles + 255) // 256 * 256)
        key = (O, L, I, sxo, sxl, syo, syl)
        prm = self.cols_prm.get(key)
        f = self.plan.fold  # FOLD: I is the original I times f (the kernel's fI = I / f)
        if prm is None:  # built once per shape; the pointer slots are rewritten per call
            # nrs: packs a thread an item, the axis's rows shared evenly by the splits
            ny = self.block[0] // tx
            nrs = _cdiv(_cdiv(L, ny), splits)
            if nrs > self.extra[3]:  # (the plan's splits hold the axis in NR packs a thread)
                raise RuntimeError(f"cusoftmax: sync plan {self.plan.kernel} with {splits} splits cannot "
                                   f"hold an axis of {L}")
            prm = self.cols_prm[key] = Params((0, 0, O, L, I, sxo, sxl, syo, syl, splits, tx, 0, 0, I // f, nrs, ny * nrs))
        gx, gy, gz, bx, by, bz, sm = self.dims
        with prm.lock:
            v = prm.vals
            v[0], v[1], v[11], v[12] = xptr, yptr, part.data.ptr, cnt
            rc = _coop_launch(self.fptr, gx, gy, gz, bx, by, bz, sm, stream, prm.addr)
        if rc:  # (the fallback is a plan of the original, unfolded problem)
            self._sync_refused(rc, f"shape (outer {O}, reduced {L * f}, inner {I // f})").cols(
                xptr, yptr, O, L * f, I // f, sxo, sxl // f, syo, syl // f)

    def _cols_slab(self, xptr, yptr, O, L, I, sxo, sxl, syo, syl) -> None:
        """softmax_cols_slab: partials and totals in a pool buffer, its 3
        barrier counters in the per-stream zeroed workspace, one cooperative
        launch; the plan's fallback (the plan the slab replaced, in its own
        folded shape) where the driver refuses the grid."""
        stream = _current_stream().ptr
        G = self.grid[0]
        ws = _cupy.empty(self.ws_elems, self.ws_dtype)
        cnt = zeroed_workspace(self.device_id, stream, "colslab", 256)
        prm = self.cols_prm.get((L, I))
        if prm is None:  # (x, y, N, I, ppb, PS, part, tot, cnt): pointers rewritten per call
            prm = self.cols_prm[(L, I)] = Params((0, 0, L * I, I, self.extra[0], self.extra[1], 0, 0, 0))
        gx, gy, gz, bx, by, bz, sm = self.dims
        with prm.lock:
            v = prm.vals
            v[0], v[1], v[6], v[7], v[8] = xptr, yptr, ws.data.ptr, ws.data.ptr + 8 * I * G, cnt
            rc = _coop_launch(self.fptr, gx, gy, gz, bx, by, bz, sm, stream, prm.addr)
        if rc:
            fb = self._sync_refused(rc, f"shape (outer {O}, reduced {L}, inner {I})")
            L, I, sxl, syl = folded_args(fb.plan, L, I, sxl, syl)
            fb.cols(xptr, yptr, O, L, I, sxo, sxl, syo, syl)

    def _cols_wide(self, xptr, yptr, L, I) -> None:
        """softmax_cols_wide_*: one dense slab as (L, I) (already folded: the
        original unit-stride length is I / fold): partials, their merge (at
        the workspace's end), then the second stream."""
        G, rpc, pf = self.extra
        f = self.plan.fold
        ws = _cupy.empty(self.ws_elems, self.ws_dtype)
        fin = ws.data.ptr + 4 * 2 * G * I  # (float32 pairs: part[G][I], then fin)
        self.pre_fn(self.pre_grid, self.block, (xptr, ws, L, numpy.int32(pf), rpc))
        self.mid_fn(self.plan.mid_grid, self.plan.mid_block, (ws, fin, numpy.int32(G), I, I // f, numpy.int32(f)))
        self.fn(self.grid, self.block, (xptr, yptr, fin, L, numpy.int32(pf), I // f, rpc))

    def rows(self, xptr: int, yptr: int, R: int, L: int, sx: int, sy: int) -> None:
        """Launch on the rows layout (all pointers/strides in elements' units
        already applied: ptrs are byte addresses, strides in elements)."""
        try:
            if self.sync:
                if self.fptr is None or _drv_launch is None:  # (no direct launch: cannot happen with CuPy)
                    raise RuntimeError("cooperative launch unavailable")
                prm = Params((xptr, yptr, R, L, sx, sy, 0))
                self.fast(prm, xptr, yptr)
            elif self.pre_fn is None:
                self.fn(self.grid, self.block, (xptr, yptr, R, L, sx, sy) + self.extra,
                        shared_mem=self.smem)
            else:
                import cupy

                ws = cupy.empty(self.ws_elems, self.ws_dtype)
                self.pre_fn(self.pre_grid, self.block, (xptr, ws, R, L, sx) + self.extra)
                self.fn(self.grid, self.block, (xptr, yptr, ws, R, L, sx, sy) + self.extra)
        except _CUDA_ERRORS as e:
            raise self._failed(e, f"{R} rows of {L} elements") from e

    def cols(self, xptr, yptr, O, L, I, sxo, sxl, syo, syl) -> None:
        try:
            if self.sync:
                if self.slab:
                    self._cols_slab(xptr, yptr, O, L, I, sxo, sxl, syo, syl)
                else:
                    self._cols_sync(xptr, yptr, O, L, I, sxo, sxl, syo, syl)
                return
            if self.pre_fn is None:
                self.fn(self.grid, self.block, (xptr, yptr, O, L, I, sxo, sxl, syo, syl,
                                                numpy.int32(self.extra[0])), shared_mem=self.smem)
                return
            if self.mid_fn is not None:
                self._cols_wide(xptr, yptr, L, I)
                return
            tx, lps, tiles = numpy.int32(self.extra[0]), self.extra[1], self.extra[2]
            ws = _cupy.empty(self.ws_elems, self.ws_dtype)
            # per-tile counters: zero on entry, left zero by the kernel
            cnt = zeroed_workspace(self.device_id, _current_stream().ptr, "colsplit",
                                   (4 * tiles + 255) // 256 * 256)
            self.pre_fn(self.pre_grid, self.block, (xptr, ws, cnt, O, L, I, sxo, sxl, lps, tx))
            self.fn(self.grid, self.block, (xptr, yptr, ws, O, L, I, sxo, sxl, syo, syl, lps, tx,
                                            I // self.plan.fold))  # (fI: the FOLD form's original I)
        except _CUDA_ERRORS as e:
            raise self._failed(e, f"shape (outer {O}, reduced {L}, inner {I})") from e
