"""The float64 NumPy reference (CPU only): against SciPy, special values,
axes, 0-d input and the worked example."""
import numpy as np
import pytest

from cusoftmax import reference

scipy_special = pytest.importorskip("scipy.special", reason="scipy is not installed (pip install scipy)")

WORKED_X = [[1.0, 2.0, 3.0], [1.0, 3.0, 5.0]]
WORKED_Y = [[0.0900, 0.2447, 0.6652], [0.0159, 0.1173, 0.8668]]


def test_worked_example():
    y = reference.softmax(np.array(WORKED_X))
    assert y.dtype == np.float64
    np.testing.assert_allclose(y, WORKED_Y, atol=5e-5)
    np.testing.assert_allclose(reference.log_softmax(np.array(WORKED_X)), np.log(y), rtol=1e-13)


@pytest.mark.parametrize("shape,axis", [
    ((7,), -1), ((4, 9), -1), ((4, 9), 0), ((3, 4, 5), 1), ((3, 4, 5), (0, 2)),
    ((3, 4, 5), (2, 0)), ((3, 4, 5), None), ((2, 3, 4, 5), (1, 2)), ((1, 1), -1), ((5, 1), -1),
])
@pytest.mark.parametrize("scale", [1.0, 30.0, 1e3])
def test_matches_scipy(shape, axis, scale):
    rng = np.random.default_rng(hash((shape, str(axis))) % 2**32)
    x = rng.standard_normal(shape) * scale
    np.testing.assert_allclose(reference.softmax(x, axis=axis), scipy_special.softmax(x, axis=axis),
                               rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(reference.log_softmax(x, axis=axis),
                               scipy_special.log_softmax(x, axis=axis), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_input_dtypes_promote_to_float64(dtype):
    x = np.array(WORKED_X, dtype=dtype)
    y = reference.softmax(x)
    assert y.dtype == np.float64
    np.testing.assert_allclose(y, scipy_special.softmax(x.astype(np.float64), axis=-1), rtol=1e-13)


def test_bfloat16_input():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = np.array(WORKED_X, dtype=ml_dtypes.bfloat16)
    np.testing.assert_allclose(reference.softmax(x), WORKED_Y, atol=5e-5)


def test_rows_sum_to_one():
    x = np.random.default_rng(1).standard_normal((50, 1000)) * 20
    np.testing.assert_allclose(reference.softmax(x).sum(-1), 1.0, rtol=1e-13)


def test_shift_invariance():
    x = np.random.default_rng(2).standard_normal((8, 33))
    np.testing.assert_allclose(reference.softmax(x + 1e3), reference.softmax(x), rtol=1e-10)
    np.testing.assert_allclose(reference.log_softmax(x - 700.0), reference.log_softmax(x),
                               rtol=1e-10, atol=1e-11)


# ----------------------------------------------------------------------------
# Special values: the documented rules, row by row
# ----------------------------------------------------------------------------
def test_neg_inf_element_is_exactly_zero():
    x = np.array([[1.0, -np.inf, 2.0], [-np.inf, 0.0, -np.inf]])
    y = reference.softmax(x)
    assert y[0, 1] == 0.0 and y[1, 0] == 0.0 and y[1, 2] == 0.0
    assert y[1, 1] == 1.0
    np.testing.assert_allclose(y[0, [0, 2]], scipy_special.softmax([1.0, 2.0]), rtol=1e-14)
    ly = reference.log_softmax(x)
    assert ly[0, 1] == -np.inf and ly[1, 0] == -np.inf and ly[1, 1] == 0.0
    np.testing.assert_allclose(ly, scipy_special.log_softmax(x, axis=-1), rtol=1e-14)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_all_neg_inf_row_is_nan():
    x = np.array([[-np.inf, -np.inf, -np.inf], [0.0, 1.0, 2.0]])
    for f in (reference.softmax, reference.log_softmax):
        y = f(x)
        assert np.isnan(y[0]).all()
        assert np.isfinite(y[1]).all()
    assert np.isnan(scipy_special.softmax(x, axis=-1)[0]).all()


def test_nan_anywhere_makes_row_nan():
    x = np.array([[0.0, np.nan, 1.0], [np.nan, -np.inf, 5.0], [1.0, 2.0, 3.0]])
    for f in (reference.softmax, reference.log_softmax):
        y = f(x)
        assert np.isnan(y[:2]).all()
        assert not np.isnan(y[2]).any()


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_pos_inf_makes_row_nan_for_both_ops():
    """Our rule: +inf anywhere in a row gives an all-NaN row, for softmax (as
    scipy.special.softmax) AND log_softmax, where SciPy differs (it gives -inf
    and NaN / 0 entries): the reference follows our rule, not SciPy's."""
    x = np.array([[0.0, np.inf, 1.0], [np.inf, np.inf, -np.inf], [1.0, 2.0, 3.0]])
    y = reference.softmax(x)
    assert np.isnan(y[:2]).all() and np.isfinite(y[2]).all()
    assert np.isnan(scipy_special.softmax(x, axis=-1)[:2]).all()  # SciPy agrees here
    ly = reference.log_softmax(x)
    assert np.isnan(ly[:2]).all() and np.isfinite(ly[2]).all()
    with np.errstate(invalid="ignore"):
        sly = scipy_special.log_softmax(x[:1], axis=-1)
    assert not np.isnan(sly).all(), "scipy's log_softmax no longer differs: update this note"


def test_huge_magnitudes():
    x = np.array([[1e308, -1e308, 0.0], [3e38, -3e38, 3e38], [1e4, 1e4 - 1, -1e4]])
    y = reference.softmax(x)
    assert np.isfinite(y).all()
    np.testing.assert_array_equal(y[0], [1.0, 0.0, 0.0])
    np.testing.assert_allclose(y[1], [0.5, 0.0, 0.5])
    np.testing.assert_allclose(y[2, :2], scipy_special.softmax([1.0, 0.0]), rtol=1e-13)
    ly = reference.log_softmax(x)
    assert ly[0, 0] == 0.0 and np.isneginf(ly[0, 1])  # -1e308 - 1e308 overflows float64
    np.testing.assert_allclose(ly[1, 0], -np.log(2.0), rtol=1e-14)


def test_all_equal_row():
    x = np.full((3, 17), 42.5)
    np.testing.assert_allclose(reference.softmax(x), 1 / 17, rtol=1e-15)
    np.testing.assert_allclose(reference.log_softmax(x), -np.log(17), rtol=1e-15)


# ----------------------------------------------------------------------------
# Axes and shapes
# ----------------------------------------------------------------------------
def test_axis_none_is_all_axes():
    x = np.random.default_rng(3).standard_normal((3, 4, 5))
    y = reference.softmax(x, axis=None)
    np.testing.assert_allclose(y.sum(), 1.0, rtol=1e-14)
    np.testing.assert_allclose(y, scipy_special.softmax(x, axis=None), rtol=1e-13)
    np.testing.assert_allclose(y, reference.softmax(x, axis=(0, 1, 2)), rtol=1e-15)
    np.testing.assert_allclose(y.reshape(-1), reference.softmax(x.reshape(-1)), rtol=1e-15)


def test_tuple_axis_equals_reshape():
    x = np.random.default_rng(4).standard_normal((3, 4, 5))
    y = reference.softmax(x, axis=(0, 2))
    moved = np.moveaxis(x, 1, 0).reshape(4, 15)
    np.testing.assert_allclose(np.moveaxis(y, 1, 0).reshape(4, 15), reference.softmax(moved), rtol=1e-14)
    np.testing.assert_allclose(reference.softmax(x, axis=(-1, 0)), y, rtol=1e-15)


def test_negative_axis():
    x = np.random.default_rng(5).standard_normal((3, 4, 5))
    np.testing.assert_allclose(reference.softmax(x, axis=-2), reference.softmax(x, axis=1), rtol=1e-15)


def test_zero_dim_axis_none():
    x = np.float64(3.25)
    assert reference.softmax(np.asarray(x), axis=None) == 1.0
    assert reference.log_softmax(np.asarray(x), axis=None) == 0.0
    assert reference.softmax(np.asarray(x), axis=None).shape == ()


def test_empty_non_reduced_axis():
    x = np.zeros((0, 5))
    assert reference.softmax(x).shape == (0, 5)
    assert reference.log_softmax(x).shape == (0, 5)


def test_accepts_lists_and_cupy_like():
    class FakeGpu:  # anything with .get() is treated as a device array
        def __init__(self, a):
            self.a = np.asarray(a)

        def get(self):
            return self.a

    np.testing.assert_allclose(reference.softmax(FakeGpu(WORKED_X)), WORKED_Y, atol=5e-5)
    np.testing.assert_allclose(reference.softmax(WORKED_X), WORKED_Y, atol=5e-5)
