"""Triton fused softmax peer, as in Triton's tutorial 02 ("Fused Softmax").

The tutorial's one-read kernel: one program per row, the whole row loaded
into registers (``BLOCK_SIZE = next_pow2(cols)``), max, exp, sum and the
division done on chip, one write. ``LOG`` adds the log-softmax variant the
tutorial leaves out (``z - log(sum)``); arithmetic is float32 for every
storage type. Imported only when triton and torch are importable.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

#: Longest row (next power of two) one program holds; longer rows are skipped
#: (the tutorial's kernel keeps the whole row in registers and spills far
#: before this).
MAX_BLOCK_SIZE = 131072


@triton.jit
def _softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols,
                    BLOCK_SIZE: tl.constexpr, LOG: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    z = x - tl.max(x, axis=0)
    num = tl.exp(z)
    den = tl.sum(num, axis=0)
    if LOG:
        y = z - tl.log(den)
    else:
        y = num / den
    tl.store(out_ptr + row * out_row_stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def num_warps_for(block_size: int) -> int:
    """The tutorial's heuristic: more warps for longer rows."""
    if block_size >= 4096:
        return 16
    if block_size >= 2048:
        return 8
    return 4


def unsupported(shape, axis, col_stride, row_stride_ok=True):
    """Why this kernel cannot run a case (None when it can)."""
    if len(shape) != 2 or axis not in (-1, 1):
        return "the tutorial kernel handles 2-D arrays reduced along the last axis only"
    if col_stride != 1 or not row_stride_ok:
        return "the tutorial kernel needs unit stride along the row"
    block = triton.next_power_of_2(shape[1])
    if block > MAX_BLOCK_SIZE:
        return f"row does not fit one program (BLOCK_SIZE {block} > {MAX_BLOCK_SIZE})"
    return None


def softmax(x: "torch.Tensor", log: bool = False, out_dtype=None) -> "torch.Tensor":
    """Softmax (or log-softmax) of each row of a 2-D tensor with unit column stride."""
    n_rows, n_cols = x.shape
    block = triton.next_power_of_2(n_cols)
    y = torch.empty((n_rows, n_cols), dtype=out_dtype or x.dtype, device=x.device)
    _softmax_kernel[(n_rows,)](y, x, x.stride(0), y.stride(0), n_cols, BLOCK_SIZE=block, LOG=log,
                               num_warps=num_warps_for(block))
    return y
