"""The one provider registry: every implementation the benchmark times.

A provider has a name (``cusoftmax``, ``cusoftmax-online``, ``torch``, ...),
the operation it implements, a ``build(case, inputs)`` that returns the call
``(fn, args, kwargs)`` to time, an ``unsupported(case, inputs)`` that says why
a case cannot run (None when it can) and a ``to_cupy(result)`` used by the
correctness check. Providers whose library is missing are not faked: they
are left out and the reason is recorded once per suite.

Operations
----------
softmax, log_softmax                       inputs [x]      result y
softmax_backward, log_softmax_backward     inputs [y, dy]  result dx
softmax_topk                               inputs [x]      result (values, indices)
"""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Callable, Optional

from . import _env

FORWARD_OPS = ("softmax", "log_softmax")
BACKWARD_OPS = ("softmax_backward", "log_softmax_backward")
TOPK_OPS = ("softmax_topk",)

FORWARD_ALGOS = ("auto", "naive", "safe", "online")
TOPK_ALGOS = ("auto", "online", "safe", "unfused")


@dataclass
class Provider:
    name: str
    op: str
    family: str
    build: Callable
    unsupported: Callable = lambda case, inputs: None
    to_cupy: Callable = lambda r: r
    doc: str = ""


def _algo_name(algo: str) -> str:
    return "cusoftmax" if algo == "auto" else f"cusoftmax-{algo}"


# ----------------------------------------------------------------------------
# Case inputs with cached zero-copy torch views
# ----------------------------------------------------------------------------
class CaseInputs:
    """The cupy input arrays of one case, and their torch views (made once)."""

    def __init__(self, arrays):
        self.arrays = list(arrays)
        self._torch = None

    def torch(self):
        if self._torch is None:
            self._torch = [torch_view(a) for a in self.arrays]
        return self._torch


def _torch_dtype(name: str):
    import torch
    return {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
            "float64": torch.float64}[name]


def torch_view(a):
    """Zero-copy torch tensor of a cupy array (16-bit types through an int16 view,
    which every DLPack version carries)."""
    import cupy
    import torch

    if a.dtype.name in ("bfloat16", "float16"):
        return torch.from_dlpack(a.view(cupy.int16)).view(_torch_dtype(a.dtype.name))
    return torch.from_dlpack(a)


def cupy_view(t):
    """Zero-copy cupy array of a torch tensor (the inverse of :func:`torch_view`)."""
    import cupy
    import torch

    from ._cases import np_dtype

    if t.dtype in (torch.bfloat16, torch.float16):
        name = "bfloat16" if t.dtype == torch.bfloat16 else "float16"
        return cupy.from_dlpack(t.view(torch.int16)).view(np_dtype(name))
    return cupy.from_dlpack(t)


def _torch_result(r):
    if isinstance(r, tuple):  # torch.topk's (values, indices)
        return tuple(cupy_view(t) for t in r)
    return cupy_view(r)


# ----------------------------------------------------------------------------
# The registry
# ----------------------------------------------------------------------------
def _cusoftmax_providers(notes):
    cs, why = _env.optional("cusoftmax")
    if cs is None:
        notes.append(f"cusoftmax: {why}")
        return []
    out = []
    for op in FORWARD_OPS:
        fn = getattr(cs, op)
        for algo in FORWARD_ALGOS:
            def build(case, inp, fn=fn, algo=algo):
                kw = {"axis": case.axis, "algorithm": algo}
                if case.out_dtype:
                    kw["dtype"] = _np(case.out_dtype)
                return fn, (inp.arrays[0],), kw
            out.append(Provider(_algo_name(algo), op, "cusoftmax", build,
                                doc=f"cusoftmax.{op}(x, algorithm={algo!r})"))
    for op in BACKWARD_OPS:
        fn = getattr(cs, op, None)
        if fn is None:
            notes.append(f"cusoftmax.{op}: not in this build of cusoftmax")
            continue
        out.append(Provider("cusoftmax", op, "cusoftmax",
                            lambda case, inp, fn=fn: (fn, tuple(inp.arrays), {"axis": case.axis}),
                            doc=f"cusoftmax.{op}(y, dy)"))
    fn = getattr(cs, "softmax_topk", None)
    if fn is None:
        notes.append("cusoftmax.softmax_topk: not in this build of cusoftmax")
    else:
        for algo in TOPK_ALGOS:
            out.append(Provider(_algo_name(algo), "softmax_topk", "cusoftmax",
                                lambda case, inp, fn=fn, algo=algo: (
                                    fn, (inp.arrays[0], case.k), {"axis": case.axis, "algorithm": algo}),
                                to_cupy=lambda r: (r[0], r[1]),
                                doc=f"cusoftmax.softmax_topk(x, k, algorithm={algo!r})"))
    return out


def _np(name):
    from ._cases import np_dtype
    return np_dtype(name)


def _cupyx_providers(notes):
    sp, why = _env.optional("cupyx.scipy.special")
    if sp is None:
        notes.append(f"cupyx: {why}")
        return []
    import cupy

    def no_dtype(case, inp):
        return "cupyx.scipy.special has no dtype= argument" if case.out_dtype else None

    out = [Provider("cupyx", op, "cupyx",
                    lambda case, inp, f=getattr(sp, op): (f, (inp.arrays[0],), {"axis": case.axis}),
                    unsupported=no_dtype, doc=f"cupyx.scipy.special.{op}(x)")
           for op in FORWARD_OPS]

    def cupy_topk(x, k, axis):
        # What a CuPy user writes today: softmax, argpartition, gather, sort.
        p = sp.softmax(x, axis=axis)
        idx = cupy.argpartition(-p, k - 1, axis=axis)[..., :k]
        v = cupy.take_along_axis(p, idx, axis=axis)
        order = cupy.argsort(-v, axis=axis)
        return cupy.take_along_axis(v, order, axis=axis), cupy.take_along_axis(idx, order, axis=axis)

    out.append(Provider("cupy", "softmax_topk", "cupy",
                        lambda case, inp: (cupy_topk, (inp.arrays[0], case.k, case.axis), {}),
                        doc="cupyx softmax -> cupy.argpartition -> gather -> sort"))
    return out


def _torch_providers(notes):
    torch, why = _env.torch_cuda()
    if torch is None:
        notes.append(f"torch: {why}")
        return []
    out = []
    for op in FORWARD_OPS:
        f = getattr(torch, op)

        def build(case, inp, f=f):
            kw = {"dim": case.axis}
            if case.out_dtype:
                kw["dtype"] = _torch_dtype(case.out_dtype)
            return f, (inp.torch()[0],), kw
        out.append(Provider("torch", op, "torch", build, to_cupy=_torch_result, doc=f"torch.{op}(x, dim)"))

    bwd = {"softmax_backward": getattr(torch, "_softmax_backward_data", None),
           "log_softmax_backward": getattr(torch, "_log_softmax_backward_data", None)}
    for op, f in bwd.items():
        if f is None:
            notes.append(f"torch: no torch._{op}_data in torch {torch.__version__}")
            continue

        def build(case, inp, f=f):
            y, dy = inp.torch()
            return f, (dy, y, case.axis, y.dtype), {}
        out.append(Provider("torch", op, "torch", build, to_cupy=_torch_result,
                            doc=f"torch._{op}_data(grad_output, output, dim, input_dtype)"))

    def torch_topk(t, k, dim):
        return torch.topk(torch.softmax(t, dim), k, dim=dim)

    out.append(Provider("torch", "softmax_topk", "torch",
                        lambda case, inp: (torch_topk, (inp.torch()[0], case.k, case.axis), {}),
                        to_cupy=_torch_result, doc="torch.topk(torch.softmax(x, dim), k)"))
    return out


def _triton_providers(notes):
    torch, why = _env.torch_cuda()
    if torch is None:
        notes.append(f"triton: needs torch ({why})")
        return []
    tr, why = _env.optional("bench._triton_softmax")
    if tr is None:
        notes.append(f"triton: {why}")
        return []

    def unsupported(case, inp):
        a = inp.arrays[0]
        return tr.unsupported(case.shape, case.axis, a.strides[-1] // a.itemsize if a.ndim else 1)

    out = []
    for op in FORWARD_OPS:
        log = op == "log_softmax"

        def build(case, inp, log=log):
            kw = {"log": log}
            if case.out_dtype:
                kw["out_dtype"] = _torch_dtype(case.out_dtype)
            return tr.softmax, (inp.torch()[0],), kw
        out.append(Provider("triton", op, "triton", build, unsupported=unsupported, to_cupy=_torch_result,
                            doc="Triton tutorial fused softmax (bench/_triton_softmax.py)"))
    return out


#: Display order of the providers (tables and plot legends).
ORDER = ("cusoftmax", "cusoftmax-online", "cusoftmax-safe", "cusoftmax-naive", "cusoftmax-unfused",
         "torch", "triton", "cupyx", "cupy")


def registry(selection: Optional[str] = None):
    """``({op: [Provider, ...]}, notes)`` of everything importable here.

    ``selection``: comma-separated names or globs (``cusoftmax*,torch``).
    """
    notes: list = []
    provs = (_cusoftmax_providers(notes) + _torch_providers(notes) + _triton_providers(notes)
             + _cupyx_providers(notes))
    if selection:
        pats = [p.strip() for p in selection.split(",") if p.strip()]
        provs = [p for p in provs if any(fnmatch.fnmatchcase(p.name, pat) for pat in pats)]
    by_op: dict = {}
    for p in sorted(provs, key=lambda p: ORDER.index(p.name) if p.name in ORDER else len(ORDER)):
        by_op.setdefault(p.op, []).append(p)
    return by_op, notes


def describe(selection: Optional[str] = None) -> str:
    """Human-readable list of providers and the reasons for missing ones."""
    by_op, notes = registry(selection)
    lines = []
    for op, ps in by_op.items():
        lines.append(f"{op}:")
        lines += [f"  {p.name:<18} {p.doc}" for p in ps]
    if notes:
        lines.append("not available:")
        lines += [f"  {n}" for n in notes]
    return "\n".join(lines)
