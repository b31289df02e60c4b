"""Helpers shared by the tests: GPU detection, array construction, tolerances."""
import numpy as np


def _probe():
    try:
        import cupy
    except Exception as e:  # pragma: no cover
        return False, f"no GPU: cupy is not importable ({type(e).__name__}: {e})"
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:
        return False, f"no GPU: CUDA is not usable here ({type(e).__name__}: {e})"
    if n < 1:
        return False, "no GPU: CUDA reports no devices"
    return True, ""


HAS_GPU, GPU_REASON = _probe()

DTYPES = ("float16", "bfloat16", "float32", "float64")


def np_dtype(name):
    """NumPy dtype for a name, bfloat16 through ml_dtypes."""
    if name == "bfloat16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def to_gpu(a, dtype):
    """Host float array -> CuPy array of ``dtype`` (rounded on the host)."""
    import cupy
    return cupy.asarray(np.asarray(a).astype(np_dtype(dtype)))


#: Per-dtype tolerances for results compared with the float64 reference:
#: (atol, rtol) on softmax probabilities, |y - ref| <= atol + rtol * |ref|;
#: log-softmax uses LOG_TOL. The key is the result's precision class
#: (``tol_key``); ``sum_rtol(key, L)`` is added to rtol for long rows.
#: Figures (u = unit roundoff of the compute type, 2^-24 for float):
#:  float64: exp/log are correctly rounded to ~1 ulp; x - m is rounded
#:    (|x - m| u <= 700 u ~ 1e-13 relative): rtol 1e-12; atol only for
#:    results below ~1e-15, whose absolute error is far smaller still.
#:  float32: per element ex2.approx (2 ulp = 2.4e-7) + the rounding of
#:    (x - m) * log2(e) and of x - m, each |x - m| * 6e-8 relative: for results
#:    above atol / rtol (2.5e-4) |x - m| <= 8.3, so <= 1.2e-6; + 1/d (1 ulp) and
#:    the error of the row sum d (<= ~1e-6 for short rows; long rows get
#:    sum_rtol) + output rounding 6e-8: rtol 4e-6. Below 2.5e-4 the absolute
#:    error is < 2.5e-4 * 4e-6 = 1e-9 (and ftz flushes < 1.2e-38 to 0): atol 1e-9.
#:  float16 result: one rounding of the output, half an ulp = 2^-11 relative
#:    (4.9e-4) for normal values, 2^-25 absolute for subnormals (< 6.1e-5),
#:    plus the float32 compute error (~1e-6): rtol 1e-3 (two half-ulps),
#:    atol 2^-24 (one subnormal step).
#:  bfloat16 result: half an ulp is 2^-8 relative (3.9e-3, 8 significant
#:    bits) + compute error: rtol 8e-3; float32's range, and ftz flushes
#:    values < 2^-126 to 0: atol 2^-125.
TOL = {
    "float64": (1e-15, 1e-12),
    "float32": (1e-9, 4e-6),
    "float16": (2.0 ** -24, 1e-3),
    "bfloat16": (2.0 ** -125, 8e-3),
}
#: log-softmax: |y - ref| <= LOG_TOL * max(1, |ref|). y = (x - m) - log d
#: with x - m <= 0 <= log d, so |x - m| and log d are both <= |y|: the three
#: roundings cost <= 3 u |y|, and the error of d adds its relative error as an
#: absolute error (~1e-6 in float32 for short rows; sum_rtol for long ones).
#:  float64: 3 u |y| ~ 3.3e-16 |y| + log(d) to 1 ulp: 1e-13.
#:  float32: 1e-6 (d's relative error, dominating 3 u |y| = 1.8e-7 |y|).
#:  float16 / bfloat16 result: one output rounding, half an ulp (4.9e-4 /
#:    3.9e-3) of |y| for |y| >= 1, below that 2^-25 / 2^-9 absolute or less,
#:    plus float32 compute error: 1e-3 / 8e-3.
LOG_TOL = {
    "float64": 1e-13,
    "float32": 1e-6,
    "float16": 1e-3,
    "bfloat16": 8e-3,
}

#: Unit roundoff of the arithmetic behind each result class.
_COMPUTE_U = {"float64": 2.0 ** -53, "float32": 2.0 ** -24, "float16": 2.0 ** -24,
              "bfloat16": 2.0 ** -24}


def _name(dt):
    return dt if isinstance(dt, str) else np.dtype(dt).name


def tol_key(in_dtype, out_dtype=None):
    """Tolerance class of a result: its own dtype. A 16-bit or float32
    result is limited by its rounding and float32 arithmetic (float64 inputs
    computed in double, then rounded, are at least as accurate); a float64
    result is computed in double."""
    i = _name(in_dtype)
    return i if out_dtype is None else _name(out_dtype)


def sum_rtol(key, L):
    """Extra relative error of the row normaliser d for rows of ``L``
    elements. The streaming kernels (>= 256 threads per row) sum up to L / 256
    terms serially per thread; rounding errors of a serial sum of n terms
    grow like sqrt(n) u (random walk), and 3 sqrt(n) u bounds them with
    margin. Negligible (< 4e-7 in float32) for rows that fit on chip."""
    return 3.0 * _COMPUTE_U[key] * float(max(L, 1) / 256.0) ** 0.5


def tolerance(in_dtype, out_dtype=None, L=1, log=False):
    """(atol, rtol) for softmax, or the LOG_TOL scale for log-softmax,
    including the long-row term."""
    key = tol_key(in_dtype, out_dtype)
    if log:
        return LOG_TOL[key] + sum_rtol(key, L)
    atol, rtol = TOL[key]
    return atol, rtol + sum_rtol(key, L)
