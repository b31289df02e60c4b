"""Find, expand and compile the CUDA sources in ``kernels/``.

Every kernel is compiled on first use, one name expression at a time, through
``cupy.RawModule`` (NVRTC), and the resulting function handle is kept for the
rest of the process. The source handed to NVRTC has every ``#include "x.cuh"``
of the project inlined, so CuPy's on-disk cache (keyed on the source text, the
options and the architecture) is also keyed on the content of every header.
"""
from __future__ import annotations

import hashlib
import os
import re
import threading
import warnings

__all__ = ["kernel_dir", "expanded_source", "get_kernel", "COMPILE_OPTIONS"]

#: NVRTC options used for every kernel (CuPy adds the architecture).
COMPILE_OPTIONS = ("-std=c++17",)

_INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"\s*$', re.M)


def kernel_dir() -> str:
    """Directory holding the ``.cu``/``.cuh`` sources.

    Installed wheels carry them as the ``cusoftmax/kernels`` package data; in a
    source checkout they are the top-level ``kernels/`` folder.
    """
    here = os.path.dirname(os.path.abspath(__file__))
    for cand in (os.path.join(here, "kernels"), os.path.join(os.path.dirname(here), "kernels")):
        if os.path.isfile(os.path.join(cand, "common.cuh")):
            return cand
    raise RuntimeError(
        "cusoftmax: CUDA sources not found (looked for kernels/common.cuh next to "
        f"{here}); the installation is incomplete, reinstall the package")


_source_cache: dict[str, str] = {}


def expanded_source(name: str) -> str:
    """Source of ``kernels/<name>`` with project headers inlined (once each)."""
    src = _source_cache.get(name)
    if src is not None:
        return src
    kdir = kernel_dir()
    seen: set[str] = set()

    def expand(fname: str) -> str:
        if fname in seen:  # every header has #pragma once semantics
            return ""
        seen.add(fname)
        with open(os.path.join(kdir, fname), encoding="utf-8") as f:
            text = f.read()
        text = text.replace("#pragma once", "")
        return _INCLUDE_RE.sub(lambda m: expand(m.group(1)), text)

    body = expand(name)
    digest = hashlib.sha256(body.encode()).hexdigest()[:16]
    src = f"// cusoftmax {name} sha256:{digest}\n{body}"
    _source_cache[name] = src
    return src


def source_digest(name: str) -> str:
    return expanded_source(name).split("sha256:", 1)[1][:16]


_kernels: dict[tuple, object] = {}
_lock = threading.Lock()

#: Cleared once CuPy's on-disk kernel cache (``CUPY_CACHE_DIR``) has failed a
#: compile that then succeeded in memory: later compiles skip the disk.
_disk_cache_ok = True


#: CUfunction_attribute values (cuda.h): a kernel's compile-time cluster
#: width, and the switch that lets it launch wider than the portable 8 blocks.
_FUNC_REQUIRED_CLUSTER_WIDTH = 11
_FUNC_NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14
#: The portable cluster size of sm_90 (cuda.h).
PORTABLE_CLUSTER = 8


def cluster_width(k) -> int:
    """The compile-time cluster width of a loaded kernel (``__cluster_dims__``;
    0 where it has none or the driver cannot say)."""
    from cupy_backends.cuda.api import driver

    try:
        return int(driver.funcGetAttribute(_FUNC_REQUIRED_CLUSTER_WIDTH, k.kernel.ptr))
    except Exception:  # noqa: BLE001 - no cluster attributes on this driver / device, or a stand-in
        return 0


def _allow_cluster_size(k) -> None:
    """Let a kernel built for clusters of more than 8 blocks (``__cluster_dims__``
    16, H100's non-portable size) launch: without the attribute the launch fails.
    Kernels with portable or no clusters are left as they are. A driver that
    refuses is not an error here: the launcher then finds that no such cluster
    fits and runs the plan's fallback (``_launch.wide_clusters_fit``)."""
    if cluster_width(k) > PORTABLE_CLUSTER:
        from cupy_backends.cuda.api import driver

        try:
            driver.funcSetAttribute(k.kernel.ptr, _FUNC_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)
        except Exception:  # noqa: BLE001 - (see above)
            pass


def _compile(source: str, name_expr: str, device_id: int, in_memory: bool):
    """One NVRTC compile + load through ``cupy.RawModule``. ``in_memory``
    bypasses CuPy's disk cache (its ``CUPY_CACHE_IN_MEMORY`` switch, read at
    each compile; set only around this call, under ``_lock``)."""
    import cupy

    prev = os.environ.get("CUPY_CACHE_IN_MEMORY")
    if in_memory:
        os.environ["CUPY_CACHE_IN_MEMORY"] = "1"
    try:
        with cupy.cuda.Device(device_id):
            mod = cupy.RawModule(code=expanded_source(source), options=COMPILE_OPTIONS,
                                 name_expressions=[name_expr])
            k = mod.get_function(name_expr)
            k.attributes  # force compilation + load on this device now
            _allow_cluster_size(k)
        return k
    finally:
        if in_memory:
            if prev is None:
                os.environ.pop("CUPY_CACHE_IN_MEMORY", None)
            else:
                os.environ["CUPY_CACHE_IN_MEMORY"] = prev


def _is_compile_error(e: BaseException) -> bool:
    try:
        from cupy.cuda.compiler import CompileException
    except ImportError:  # pragma: no cover
        return False
    return isinstance(e, CompileException)


def _compile_kernel(source: str, name_expr: str, device_id: int):
    """Compile with CuPy's disk cache; if that fails for a reason other than
    the source (an unwritable or corrupted ``CUPY_CACHE_DIR``: a read-only
    directory, an entry that is not a file, a cached binary that does not
    load), warn once and compile in memory from then on."""
    global _disk_cache_ok
    if not _disk_cache_ok:
        return _compile(source, name_expr, device_id, True)
    try:
        return _compile(source, name_expr, device_id, False)
    except Exception as e:
        if _is_compile_error(e):
            raise
        try:
            k = _compile(source, name_expr, device_id, True)
        except Exception:
            raise e from None  # not the cache's fault: report the first error
        _disk_cache_ok = False
        cache_dir = os.environ.get("CUPY_CACHE_DIR", "~/.cupy/kernel_cache")
        warnings.warn(
            f"cusoftmax: CuPy's kernel cache ({cache_dir}) could not be used "
            f"({type(e).__name__}: {e}); compiling kernels in memory for the rest of this "
            "process (set CUPY_CACHE_DIR to a writable directory to keep them across runs)",
            RuntimeWarning, stacklevel=4)
        return k


def get_kernel(source: str, name_expr: str, device_id: int):
    """Compiled kernel ``name_expr`` from ``kernels/<source>`` for a device.

    Thread-safe: concurrent first calls compile once and share the handle.
    An unusable CuPy kernel cache directory costs a warning, not an error.
    """
    key = (source, name_expr, device_id)
    k = _kernels.get(key)
    if k is not None:
        return k
    with _lock:
        k = _kernels.get(key)
        if k is None:
            k = _compile_kernel(source, name_expr, device_id)
            _kernels[key] = k
    return k
