"""Packaging (CPU): the built wheel ships every kernel source, a plain
(non-editable) install finds them, and the loader's source text is keyed on
the headers' content."""
import glob
import hashlib
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNELS = sorted(os.path.basename(p) for p in glob.glob(os.path.join(ROOT, "kernels", "*.cu*")))


def _have_build():
    try:
        import build  # noqa: F401
    except ImportError:
        return False
    return True


def _backend_ready():
    """setuptools >= 77 (an SPDX ``license`` string) and wheel importable
    (pyproject's build requirements)."""
    try:
        import setuptools
        import wheel  # noqa: F401
    except ImportError:
        return False
    return int(setuptools.__version__.split(".")[0]) >= 77


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    if not _have_build():
        pytest.skip("the 'build' package is not installed (pip install build)")
    tmp = tmp_path_factory.mktemp("pkg")
    src = tmp / "src"
    # build from a copy: no build/ or egg-info litter in the checkout
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build", "dist")
    src.mkdir()
    for name in os.listdir(ROOT):
        p = os.path.join(ROOT, name)
        if name in ("cusoftmax", "kernels"):
            shutil.copytree(p, src / name, ignore=ignore)
        elif os.path.isfile(p) and (name in ("pyproject.toml", "setup.py", "setup.cfg", "MANIFEST.in")
                                     or name.upper().startswith(("README", "LICENSE"))):
            shutil.copy(p, src / name)
    out = tmp / "dist"
    # offline when the build backend is at hand (no isolation), else let
    # build make its isolated environment
    iso = []
    if _backend_ready():
        iso = ["--no-isolation"]
    cmd = [sys.executable, "-m", "build", "--wheel", *iso, "--outdir", str(out), str(src)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"wheel build failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    wheels = glob.glob(str(out / "*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0], tmp


def test_kernel_sources_exist():
    assert "common.cuh" in KERNELS and "softmax.cu" in KERNELS


def test_wheel_contains_every_kernel_source(wheel):
    path, _ = wheel
    names = set(zipfile.ZipFile(path).namelist())
    for k in KERNELS:
        assert f"cusoftmax/kernels/{k}" in names, f"{k} missing from the wheel: {sorted(names)}"
    assert "cusoftmax/_loader.py" in names and "cusoftmax/reference.py" in names


def test_installed_wheel_finds_sources(wheel):
    path, tmp = wheel
    target = tmp / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-compile", "--quiet",
                        "--target", str(target), path], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    probe = r"""
import hashlib, os, sys
import cusoftmax, cusoftmax._loader as L
site = sys.argv[1]
assert os.path.abspath(cusoftmax.__file__).startswith(os.path.abspath(site)), cusoftmax.__file__
kdir = L.kernel_dir()
assert os.path.abspath(kdir) == os.path.join(os.path.abspath(site), "cusoftmax", "kernels"), kdir
src = L.expanded_source("softmax.cu")
header = open(os.path.join(kdir, "common.cuh"), encoding="utf-8").read().replace("#pragma once", "")
assert header.strip()[:200] in src, "common.cuh is not inlined"
assert '#include "common.cuh"' not in src
first, body = src.split("\n", 1)
assert first.endswith("sha256:" + hashlib.sha256(body.encode()).hexdigest()[:16]), first
print(first)
"""
    env = dict(os.environ, PYTHONPATH=str(target))
    r = subprocess.run([sys.executable, "-c", probe, str(target)], capture_output=True, text=True,
                       cwd=str(tmp), env=env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    first = r.stdout.strip().splitlines()[-1]
    # changing a header changes the source text NVRTC (and CuPy's cache) sees
    with open(target / "cusoftmax" / "kernels" / "common.cuh", "a", encoding="utf-8") as f:
        f.write("\n// edited\n")
    r2 = subprocess.run([sys.executable, "-c", probe, str(target)], capture_output=True, text=True,
                        cwd=str(tmp), env=env, timeout=120)
    assert r2.returncode == 0, r2.stdout + r2.stderr
    assert r2.stdout.strip().splitlines()[-1] != first


def test_loader_source_is_keyed_on_headers(tmp_path, monkeypatch):
    """In the checkout too: the expanded source embeds a hash of its full text,
    headers inlined, and changes with a header."""
    from cusoftmax import _loader

    kdir = tmp_path / "kernels"
    shutil.copytree(os.path.join(ROOT, "kernels"), kdir)
    monkeypatch.setattr(_loader, "kernel_dir", lambda: str(kdir))
    monkeypatch.setattr(_loader, "_source_cache", {})
    a = _loader.expanded_source("softmax.cu")
    first, body = a.split("\n", 1)
    assert first.endswith(hashlib.sha256(body.encode()).hexdigest()[:16])
    assert '#include "' not in body
    monkeypatch.setattr(_loader, "_source_cache", {})
    with open(kdir / "common.cuh", "a", encoding="utf-8") as f:
        f.write("\n#define CUSOFTMAX_TEST_EDIT 1\n")
    b = _loader.expanded_source("softmax.cu")
    assert "CUSOFTMAX_TEST_EDIT" in b and b.split("\n", 1)[0] != first
    assert _loader.source_digest("softmax.cu") != first.rsplit(":", 1)[1]
