"""Shared test configuration.

GPU tests carry ``@pytest.mark.gpu`` (or use the ``gpu`` fixture); without a
usable CUDA device they are skipped with the reason below. Everything else
(reference, argument validation, packaging, NVRTC compile check) runs anywhere.
"""
import os

import pytest
from hypothesis import HealthCheck, settings

from _util import GPU_REASON, HAS_GPU

settings.register_profile(
    "default", deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile(
    "fuzz", deadline=None, max_examples=2000, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def pytest_collection_modifyitems(config, items):
    if HAS_GPU:
        return
    skip = pytest.mark.skip(reason=GPU_REASON)
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def gpu():
    """Skip unless a CUDA GPU is usable; returns the cupy module."""
    if not HAS_GPU:
        pytest.skip(GPU_REASON)
    import cupy
    return cupy


@pytest.fixture
def no_cl16(monkeypatch):
    """plan_cols without its clusters of 16 (COLS_CL16_*, which it tries before
    every other strided-axis rule on small 16-bit arrays): for the tests of
    those other rules, on their own shapes."""
    from cusoftmax import _dispatch
    monkeypatch.setattr(_dispatch, "COLS_CL16_MAX_BYTES", 0)
