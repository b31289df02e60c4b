"""Benchmark cases (explicit shape lists per suite) and their input arrays.

Inputs come from one float32 pool of standard-normal numbers drawn once per
run (sized for the largest case of the selected suites); a case's j-th input
is a view of pool segment j, cast into a preallocated 16-bit pool when the
case is bfloat16 / float16. Nothing is re-drawn or re-allocated per shape.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

GRID_ROWS = (1, 8, 64, 512, 4096)
GRID_COLS = (128, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144)
#: Extra forward shapes of issue 3: LLM vocabularies, long rows, many short rows.
EXTRA_SHAPES = ((262144, 128), (32768, 1024), (4096, 50257), (4096, 32000), (10, 1000000),
                (1, 128256), (8, 128256), (64, 128256), (32, 151936), (1, 262144))
#: float16 runs on this subset of the grid.
F16_ROWS, F16_COLS = (8, 4096), (1024, 8192, 32768, 131072)
#: The paper's vector sizes: 10^2 .. 10^6, four points per decade.
PAPER_V = tuple(int(round(v)) for v in np.geomspace(1e2, 1e6, 17))
PAPER_BATCHES = (4000, 10)
PAPER_TOPK_K = 5
PAPER_K_SWEEP = (5, 10, 15, 30, 64, 256, 1024)
PAPER_K_SWEEP_V = 25000


@dataclass(frozen=True)
class Case:
    """One problem: shape, storage dtype, reduction axis, memory layout."""
    shape: tuple
    dtype: str = "float32"
    axis: int = -1
    layout: str = "C"            # "C" or "F" (Fortran order: the transposed case)
    out_dtype: str | None = None  # result dtype when it differs from the input's
    k: int | None = None          # top-k
    grid: bool = True             # part of the rows x cols grid (plotted as lines)
    n_inputs: int = 1             # forward / top-k: x; backward: y, dy
    tags: tuple = field(default=())

    @property
    def n(self) -> int:
        return math.prod(self.shape)

    @property
    def cols(self) -> int:
        """Length of the reduced axis."""
        return self.shape[self.axis]

    @property
    def rows(self) -> int:
        return self.n // self.cols

    @property
    def result_dtype(self) -> str:
        return self.out_dtype or self.dtype

    def label(self) -> str:
        s = "x".join(str(d) for d in self.shape)
        if self.axis not in (-1, len(self.shape) - 1):
            s += f" axis={self.axis}"
        if self.layout == "F":
            s += " F-order"
        if self.out_dtype:
            s += f" ->{self.out_dtype}"
        if self.k is not None:
            s += f" k={self.k}"
        return s


ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}
SHORT = {"float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64"}


# ----------------------------------------------------------------------------
# Shape lists
# ----------------------------------------------------------------------------
def _unique(cases) -> list:
    """Drop repeats (an extra shape already in the grid), keeping the first."""
    seen, out = set(), []
    for c in cases:
        key = (c.shape, c.dtype, c.axis, c.layout, c.out_dtype, c.k)
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def forward_cases(quick: bool) -> list:
    if quick:
        out = [Case((r, c), dt) for dt in ("float32", "bfloat16") for r in (8, 4096)
               for c in (1024, 32768)]
        out += [Case((1, 128256)), Case((4096, 50257), grid=False),
                Case((2048, 1024), axis=0, grid=False), Case((1024, 2048), layout="F", grid=False),
                Case((512, 4096), "float16")]
        return out
    out = [Case((r, c), dt) for dt in ("float32", "bfloat16") for r in GRID_ROWS for c in GRID_COLS]
    out += [Case((r, c), "float16") for r in F16_ROWS for c in F16_COLS]
    out += [Case(s, dt, grid=False) for dt in ("float32", "bfloat16") for s in EXTRA_SHAPES]
    out += [Case((2048, 4096), axis=0, grid=False, tags=("non-last axis",)),
            Case((4096, 2048), layout="F", grid=False, tags=("transposed",)),
            Case((4096, 32000), "bfloat16", out_dtype="float32", grid=False, tags=("output dtype",))]
    return _unique(out)


def backward_cases(quick: bool) -> list:
    if quick:
        return [Case((r, c), dt, n_inputs=2) for dt in ("float32", "bfloat16") for r in (8, 4096)
                for c in (1024, 32768)] + [Case((1, 128256), n_inputs=2, grid=False)]
    out = [Case((r, c), dt, n_inputs=2) for dt in ("float32", "bfloat16") for r in GRID_ROWS
           for c in GRID_COLS]
    out += [Case(s, dt, grid=False, n_inputs=2) for dt in ("float32", "bfloat16") for s in EXTRA_SHAPES]
    return _unique(out)


def topk_cases(quick: bool) -> list:
    if quick:
        return [Case((4096, 32768), k=k, grid=False) for k in (5, 256)] + \
               [Case((r, 128256), k=50, grid=False) for r in (1, 64)]
    out = [Case((4096, 131072), k=k, grid=False, tags=("k sweep",)) for k in (1, 5, 10, 50, 256, 1024)]
    out += [Case((r, c), k=k, grid=False, tags=("few rows",)) for r in (1, 8, 64)
            for c in (32768, 128256, 262144) for k in (1, 5, 50)]
    out += [Case((r, c), k=k, grid=False, tags=("small grid",)) for r in (512, 4096)
            for c in (128, 1024, 4096, 32000, 50257) for k in (5, 50) if k <= c]
    out += [Case(s, "bfloat16", k=k, grid=False, tags=("small grid",)) for s in ((4096, 32000), (64, 128256))
            for k in (5, 50)]
    return _unique(out)


def paper_cases(quick: bool) -> list:
    vs = (100, 1000, 10000, 100000) if quick else PAPER_V
    return [Case((b, v), grid=False, tags=("paper",)) for b in PAPER_BATCHES for v in vs]


def paper_topk_cases(quick: bool) -> list:
    vs = (100, 1000, 25000) if quick else sorted(set(PAPER_V) | {PAPER_K_SWEEP_V})
    out = [Case((b, v), k=PAPER_TOPK_K, grid=False, tags=("paper",)) for b in PAPER_BATCHES for v in vs
           if PAPER_TOPK_K <= v]
    ks = (5, 30, 256) if quick else PAPER_K_SWEEP
    out += [Case((b, PAPER_K_SWEEP_V), k=k, grid=False, tags=("k sweep",)) for b in PAPER_BATCHES
            for k in ks if k != PAPER_TOPK_K]
    return out


# ----------------------------------------------------------------------------
# Inputs
# ----------------------------------------------------------------------------
_CAST_SRC = r"""
extern "C" __global__ void f32_to_16(const float* __restrict__ x, unsigned short* __restrict__ y,
                                     long long n, int to_bf16) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long step = (long long)gridDim.x * blockDim.x;
    for (; i < n; i += step) {
        float v = x[i];
        unsigned short h;
        if (to_bf16) {  // round to nearest even (inputs are finite)
            unsigned int u = __float_as_uint(v);
            u += 0x7FFFu + ((u >> 16) & 1u);
            h = (unsigned short)(u >> 16);
        } else {
            asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
        }
        y[i] = h;
    }
}
"""


def np_dtype(name: str):
    if name == "bfloat16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


class InputPool:
    """Standard-normal float32 numbers drawn once, handed out as views / casts."""

    def __init__(self, cases, seed: int = 0):
        import cupy

        self._cp = cupy
        self.size = max((c.n * c.n_inputs for c in cases), default=1)
        #: the 16-bit pool holds the largest bfloat16 / float16 case (allocated on first use)
        self.size16 = max((c.n * c.n_inputs for c in cases if ITEMSIZE[c.dtype] == 2), default=1)
        self.f32 = cupy.empty(self.size, dtype=cupy.float32)
        rs = cupy.random.RandomState(seed)
        step = 1 << 28
        for i in range(0, self.size, step):
            j = min(self.size, i + step)
            self.f32[i:j] = rs.standard_normal(j - i, dtype=cupy.float32)
        self._u16 = None
        self._cast = None

    def _u16_pool(self):
        if self._u16 is None:
            self._u16 = self._cp.empty(self.size16, dtype=self._cp.uint16)
            self._cast = self._cp.RawKernel(_CAST_SRC, "f32_to_16")
        return self._u16

    def _shape(self, flat, case):
        if case.layout == "F":
            return flat.reshape(case.shape[::-1]).T
        return flat.reshape(case.shape)

    def segment_f32(self, case, j: int):
        """Input j of ``case`` as float32, in the case's shape and layout."""
        n = case.n
        return self._shape(self.f32[j * n:(j + 1) * n], case)

    def cast_into(self, a32, dtype: str, case, j: int):
        """Store float32 ``a32`` (C-contiguous flat order of the case) as ``dtype`` in segment j."""
        if dtype == "float32":
            return a32
        n = case.n
        dst = self._u16_pool()[j * n:(j + 1) * n]
        src = self._cp.ascontiguousarray(a32.reshape(-1) if case.layout != "F" else a32.T.reshape(-1))
        threads = 256
        blocks = min(65535, (n + threads - 1) // threads)
        self._cast((blocks,), (threads,), (src, dst, np.int64(n), np.int32(dtype == "bfloat16")))
        return self._shape(dst.view(np_dtype(dtype)), case)

    def input(self, case, j: int = 0):
        """Input j of ``case`` (random normal) in the case's dtype, shape and layout."""
        return self.cast_into(self.segment_f32(case, j), case.dtype, case, j)
