"""Regression: a NaN must poison its row even when every other value a thread
holds is -inf or padding (fmax drops NaN). Found by the top-k work: a float32
row of length 5 with NaN last used to come out partly finite."""
import numpy as np
import pytest

from _util import to_gpu

pytestmark = pytest.mark.gpu

ALGOS = ("auto", "naive", "safe", "online")


@pytest.mark.parametrize("algorithm", ALGOS)
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("L", [2, 5, 33, 1000, 5000, 40000, 300000])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64"])
def test_nan_among_neg_inf(dtype, L, log, algorithm):
    import cusoftmax

    R = 3
    x = np.full((R, L), -np.inf)
    x[0, -1] = np.nan            # NaN last, everything else -inf
    x[1, L // 2] = np.nan        # NaN in the middle
    x[1, 0] = 1.0
    x[2, :] = np.linspace(-3, 3, L)  # an ordinary row stays finite
    y = (cusoftmax.log_softmax if log else cusoftmax.softmax)(to_gpu(x, dtype), algorithm=algorithm)
    y = cusoftmax.reference.to_float64(y)
    assert np.isnan(y[0]).all() and np.isnan(y[1]).all()
    assert np.isfinite(y[2]).all()


@pytest.mark.parametrize("L", [5, 1000, 40000])
def test_nan_among_neg_inf_many_rows(L):
    """Same with enough rows for the many-row regimes (smem, cluster)."""
    import cusoftmax

    R = 1000
    x = np.full((R, L), -np.inf, dtype=np.float32)
    x[::7, -1] = np.nan
    x[1::7, :] = 0.5
    y = cusoftmax.reference.to_float64(cusoftmax.softmax(to_gpu(x, "float32")))
    assert np.isnan(y[::7]).all()
    assert np.allclose(y[1::7], 1.0 / L)
