"""Optional imports and the run's metadata (device, versions, date).

Nothing here touches the GPU at import time, so ``python -m bench --help``
and the reporting self-test run on machines without CUDA.
"""
from __future__ import annotations

import datetime
import importlib
import os
import platform
import re
import subprocess

_cache: dict = {}


def optional(module: str):
    """``(module, None)`` when importable, else ``(None, reason)``."""
    if module not in _cache:
        try:
            _cache[module] = (importlib.import_module(module), None)
        except Exception as e:  # noqa: BLE001 - any import failure means "not available"
            _cache[module] = (None, f"{module} not importable ({type(e).__name__}: {e})")
    return _cache[module]


def torch_cuda():
    """torch when it is importable and sees a CUDA device, else ``(None, reason)``."""
    torch, why = optional("torch")
    if torch is None:
        return None, why
    try:
        if not torch.cuda.is_available():
            return None, "torch is importable but sees no CUDA device"
    except Exception as e:  # noqa: BLE001
        return None, f"torch.cuda failed ({type(e).__name__}: {e})"
    return torch, None


def slug(name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3'."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "unknown-gpu"


def _version(module: str):
    m, _ = optional(module)
    return getattr(m, "__version__", None) if m is not None else None


def _git_commit():
    """Short commit of the tree (``+dirty`` with uncommitted changes). A copy
    of the tree without a usable ``.git`` (a remote GPU machine) can name its
    commit in CUSOFTMAX_BENCH_COMMIT instead."""
    named = os.environ.get("CUSOFTMAX_BENCH_COMMIT")
    if named:
        return named
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        out = subprocess.run(["git", "-C", here, "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=5)
        dirty = subprocess.run(["git", "-C", here, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5)
        if out.returncode == 0:
            return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except Exception:  # noqa: BLE001 - no git: no commit recorded
        pass
    return None


def device_meta() -> dict:
    """Device and software description recorded with every result file."""
    import cupy

    rt = cupy.cuda.runtime
    dev = cupy.cuda.Device()
    props = rt.getDeviceProperties(dev.id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])

    def _cuda_ver(v):
        return f"{v // 1000}.{(v % 1000) // 10}"

    return {
        "device_name": name,
        "device_slug": slug(name),
        "compute_capability": dev.compute_capability,
        "sm_count": int(props["multiProcessorCount"]),
        "l2_bytes": int(props["l2CacheSize"]),
        "memory_bytes": int(props["totalGlobalMem"]),
        "driver_cuda": _cuda_ver(rt.driverGetVersion()),
        "runtime_cuda": _cuda_ver(rt.runtimeGetVersion()),
        "cupy": cupy.__version__,
        "torch": _version("torch"),
        "triton": _version("triton"),
        "numpy": _version("numpy"),
        "cusoftmax": _version("cusoftmax"),
        "cusoftmax_commit": _git_commit(),
        "python": platform.python_version(),
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
