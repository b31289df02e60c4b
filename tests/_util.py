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
#: (atol, rtol) on softmax probabilities; log-softmax uses LOG_TOL.
#: float32: a few ulp of the result (ex2.approx is ~2 ulp) plus the rounding
#: of 1/d; 16-bit: one rounding of the output (2^-8 bf16, 2^-11 fp16).
TOL = {
    "float64": (1e-14, 1e-12),
    "float32": (1e-7, 2e-6),
    "float16": (2e-5, 1e-3),
    "bfloat16": (1e-4, 8e-3),
}
#: log-softmax: absolute error relative to max(1, |y|): rounding of the
#: output value itself dominates.
LOG_TOL = {
    "float64": 1e-12,
    "float32": 2e-6,
    "float16": 1e-3,
    "bfloat16": 8e-3,
}
