"""NVRTC compile check (no GPU needed): every kernel instantiation the
dispatchers can select compiles for sm_90 (H100, DeviceInfo(132, 90)) and
sm_80 (A100, DeviceInfo(108, 80)) without register spills.

The instantiations come from ``cusoftmax._dispatch.all_*_kernels`` (forward
always; backward and top-k when those modules provide an enumeration).
Compilation runs in a process pool over batches of ~100 name expressions
(one NVRTC program per batch); needs the ``nvidia-cuda-nvrtc`` wheel, loaded
through CuPy's bindings. Stack frames are allowed (e.g. local arrays the
compiler keeps in memory), spills are not.
"""
import multiprocessing
import os
import time

import pytest

from cusoftmax import _dispatch
from cusoftmax._dispatch import DeviceInfo

ARCHS = {"sm_90": DeviceInfo(132, 90), "sm_80": DeviceInfo(108, 80)}
FAMILIES = {"forward": "all_forward_kernels", "backward": "all_backward_kernels",
            "topk": "all_topk_kernels"}
BATCH = 100


def _nvrtc_reason():
    try:
        from cupy_backends.cuda.libs import nvrtc
        nvrtc.getVersion()
    except Exception as e:  # pragma: no cover - depends on the environment
        return f"NVRTC is not loadable ({type(e).__name__}: {e}); pip install nvidia-cuda-nvrtc"
    return None


def _compile(args):
    source, names, arch = args
    from cusoftmax._compile_check import compile_batch
    try:
        return [(r.name, r.registers, r.stack, r.spill_stores, r.spill_loads, None)
                for r in compile_batch(source, names, arch)]
    except Exception as e:  # report per batch, keep going
        return [(n, 0, 0, 0, 0, f"{type(e).__name__}: {str(e)[:4000]}") for n in names]


def _workers():
    return max(2, min(os.cpu_count() or 2, 32))


def _cache_key(family, arch, by_source):
    """Everything the result depends on: NVRTC version, options, the full
    (headers inlined) text of each source, and the instantiation names."""
    import hashlib
    from cupy_backends.cuda.libs import nvrtc
    from cusoftmax._loader import COMPILE_OPTIONS, expanded_source
    h = hashlib.sha256(repr((nvrtc.getVersion(), COMPILE_OPTIONS, arch)).encode())
    for src in sorted(by_source):
        h.update(expanded_source(src).encode())
        h.update("\0".join(sorted(by_source[src])).encode())
    return f"cusoftmax/compile-check/{family}/{arch}/{h.hexdigest()[:32]}"


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("arch", list(ARCHS))
def test_every_instantiation_compiles_without_spills(family, arch, request):
    """A passing result is remembered in pytest's cache under a key covering
    the sources, names, options and NVRTC version, so an unchanged tree is
    not recompiled (CUSOFTMAX_COMPILE_CHECK_FORCE=1 recompiles anyway)."""
    reason = _nvrtc_reason()
    if reason:
        pytest.skip(reason)
    enum = getattr(_dispatch, FAMILIES[family], None)
    if enum is None:
        pytest.skip(f"cusoftmax._dispatch.{FAMILIES[family]} does not exist yet")
    kernels = enum(ARCHS[arch])
    assert kernels, "empty enumeration"
    by_source: dict = {}
    for src, name in kernels:
        by_source.setdefault(src, []).append(name)
    cache = getattr(request.config, "cache", None)
    key = _cache_key(family, arch, by_source)
    if cache is not None and not os.environ.get("CUSOFTMAX_COMPILE_CHECK_FORCE"):
        if cache.get(key, None) == len(kernels):
            print(f"{family} {arch}: {len(kernels)} kernels unchanged since a passing check")
            return
    jobs = [(src, names[i:i + BATCH], arch) for src, names in by_source.items()
            for i in range(0, len(names), BATCH)]
    t0 = time.time()
    ctx = multiprocessing.get_context("spawn")  # no CUDA state inherited
    with ctx.Pool(_workers()) as pool:
        batches = list(pool.imap_unordered(_compile, jobs))
    results = [r for b in batches for r in b]
    elapsed = time.time() - t0
    failed = [b for b in batches if b and b[0][5]]
    spills = [(n, st, ld) for n, _, _, st, ld, e in results if not e and (st or ld)]
    ok = [r for r in results if not r[5]]
    print(f"{family} {arch}: {len(results)} kernels in {len(jobs)} batches, {elapsed:.0f} s, "
          f"max registers {max((r[1] for r in ok), default=0)}, "
          f"max stack {max((r[2] for r in ok), default=0)} B")
    assert not failed, (f"{len(failed)} of {len(jobs)} batches failed to compile ({arch}); first batch "
                        f"starts with {failed[0][0][0]}:\n{failed[0][0][5]}")
    assert not spills, (f"{len(spills)} kernels spill registers ({arch}), e.g. "
                        + "; ".join(f"{n}: {s} B stores, {l} B loads" for n, s, l in spills[:5]))
    assert len(results) == len(kernels)
    if cache is not None:
        cache.set(key, len(kernels))


def test_ptxas_log_attributes_spills_by_function_name():
    """A non-inlined device function's report follows the entry's: each goes
    to the function it names (the entry's spills were once read as the last
    function's, hiding them)."""
    from cusoftmax._compile_check import parse_ptxas_log
    log = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z4kernPf' for 'sm_90'
ptxas info    : Function properties for _Z4kernPf
ptxas         .     112 bytes stack frame, 102 bytes spill stores, 156 bytes spill loads
ptxas info    : Used 64 registers, used 1 barriers, 112 bytes cumulative stack size, 1424 bytes smem
ptxas info    : Compile time = 423.005 ms
ptxas info    : Function properties for _Z6helperPy
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 4 bytes spill loads
"""
    stats = parse_ptxas_log(log)
    assert stats["_Z4kernPf"] == [64, 112, 102, 156]
    assert stats["_Z6helperPy"] == [0, 0, 0, 4]


def test_spilling_device_function_fails_the_batch():
    """A __noinline__ device function that spills fails compile_batch (its
    ptxas report belongs to no kernel of the batch), while the kernel's own
    report is clean."""
    reason = _nvrtc_reason()
    if reason:
        pytest.skip(reason)
    import cusoftmax._compile_check as cc
    src = r"""
__device__ __noinline__ float spill_me(const float* p, int n) {
  float a[96];
#pragma unroll
  for (int i = 0; i < 96; ++i) a[i] = p[i * n];
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 96; ++i) s += a[i] * a[95 - i] + a[(i * 7) % 96];
  return s;
}
extern "C" __global__ void __launch_bounds__(1024, 2) k(const float* p, float* o, int n) {
  o[threadIdx.x] = spill_me(p + threadIdx.x, n);
}
"""
    orig = cc.expanded_source
    cc.expanded_source = lambda source: src
    try:
        with pytest.raises(RuntimeError, match="device functions spill"):
            cc.compile_batch("fake.cu", ["k"], "sm_90")
    finally:
        cc.expanded_source = orig
