"""Internal launcher: device properties, plan cache and kernel launches.

The public functions in ``_api`` validate arguments once per distinct call
signature; the result (a ``_Prepared`` entry holding the kernel handles, grid,
block and the scalar arguments) is cached, so a repeated call costs a dict
lookup, an allocation and one or two launches.
"""
from __future__ import annotations

import threading

import numpy

from . import _dispatch
from ._dispatch import DeviceInfo, LaunchPlan
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
                cc=int(cupy.cuda.Device(device_id).compute_capability))
            _devinfo[device_id] = info
    return info


class Launch:
    """A plan bound to compiled kernels on one device."""
    __slots__ = ("plan", "fn", "pre_fn", "grid", "block", "pre_grid", "extra", "ws_elems", "ws_dtype")

    def __init__(self, plan: LaunchPlan, device_id: int):
        self.plan = plan
        self.fn = get_kernel(plan.source, plan.kernel, device_id)
        self.pre_fn = get_kernel(plan.source, plan.pre_kernel, device_id) if plan.pre_kernel else None
        self.grid = plan.grid
        self.block = plan.block
        self.pre_grid = plan.pre_grid
        self.extra = plan.extra
        self.ws_elems = plan.ws_elems
        self.ws_dtype = numpy.dtype(plan.ws_dtype)

    def rows(self, xptr: int, yptr: int, R: int, L: int, sx: int, sy: int) -> None:
        """Launch on the rows layout (all pointers/strides in elements' units
        already applied: ptrs are byte addresses, strides in elements)."""
        if self.pre_fn is None:
            self.fn(self.grid, self.block, (xptr, yptr, R, L, sx, sy) + self.extra)
        else:
            import cupy

            ws = cupy.empty(self.ws_elems, self.ws_dtype)
            self.pre_fn(self.pre_grid, self.block, (xptr, ws, R, L, sx) + self.extra)
            self.fn(self.grid, self.block, (xptr, yptr, ws, R, L, sx, sy) + self.extra)

    def cols(self, xptr, yptr, O, L, I, sxo, sxl, syo, syl) -> None:
        self.fn(self.grid, self.block, (xptr, yptr, O, L, I, sxo, sxl, syo, syl,
                                        numpy.int32(self.extra[0])))
