"""The row-on-chip few-rows top-k kernel (topk_csm) launched directly over
cluster sizes: results against the public call's without csm (indices equal, values to
1e-5 / 1e-2 relative, log values also absolute, NaN where it has NaN) on random, tied, sorted and
special rows, aligned and misaligned; then times against the public call
(CUDA events, L2 flushed, median of 30, us).
    PYTHONPATH=.:tools:tests python tools/csm_try.py [check] [time] [phases] [variants] [ab] [ncu K]"""
import sys
import time

import numpy as np
import cupy as cp

import cusoftmax as cs
from cusoftmax import _dispatch as D
from cusoftmax._launch import device_info
from cusoftmax._loader import expanded_source, COMPILE_OPTIONS
from tune import timeit
from test_topk import make_data, to_gpu

_mods = {}


def fn_of(kernel, smem, stop=0, opts=(), src="topk.cu"):
    key = (kernel, stop, opts, src)
    if key not in _mods:
        _mods[key] = cp.RawModule(code=expanded_source(src),
                                  options=COMPILE_OPTIONS + (f"-DTOPK_CSM_STOP={stop}",) + opts,
                                  name_expressions=[kernel]).get_function(kernel)
    f = _mods[key]
    if f.max_dynamic_shared_size_bytes < smem:
        f.max_dynamic_shared_size_bytes = smem
    return f


def launch(x2, k, CS, log=False, stop=0, opts=(), src="topk.cu", ef=False):
    """(launch closure, vals, idx) of topk_csm on the 2-D row view x2 (ef: the evict-first form)."""
    R, L = x2.shape
    isz = x2.dtype.itemsize
    pack = 16 // isz
    np_ = -(-(L + pack - 1) // pack)
    ppb = -(-np_ // CS)
    smem = ppb * 16
    dt = str(x2.dtype) if x2.dtype != cp.dtype("bfloat16") else "bfloat16"
    kern = f"topk_csm<{D.CTYPE[dt]}, {CS}{', true' if ef else ''}>"
    f = fn_of(kern, smem, stop, opts, src)
    vals = cp.empty((R, k), x2.dtype)
    idx = cp.empty((R, k), cp.int64)
    ptr = x2.data.ptr
    args = (np.uint64(ptr), vals, idx, np.int64(L), np.int64(x2.strides[0] // isz), np.int64(k), np.int64(ppb),
            np.int64(D.TOPK_OUT_CODE[dt]), np.int64(int(log)))
    return (lambda: f((CS, R), (512,), args, shared_mem=smem)), vals, idx


def same(got_v, got_i, ref, log=False):
    ri, rv = cp.asnumpy(ref.indices), cp.asnumpy(ref.values).astype(np.float64)
    gi, gv = cp.asnumpy(got_i), cp.asnumpy(got_v).astype(np.float64)
    if not np.array_equal(gi, ri):
        bad = np.argwhere(gi != ri)[:3]
        return f"indices differ at {bad.tolist()}: got {gi[tuple(bad[0])]} want {ri[tuple(bad[0])]}"
    if not np.array_equal(np.isnan(gv), np.isnan(rv)):
        return "NaN pattern differs"
    m = ~np.isnan(rv)
    tol = 1e-5 if ref.values.dtype == cp.float32 else 2e-2
    # log values near 0 (-log d with d near 1) carry d's rounding absolutely
    if not np.allclose(gv[m], rv[m], rtol=tol, atol=tol if log else 1e-30):
        return f"values differ: max rel {np.max(np.abs(gv[m] - rv[m]) / np.maximum(np.abs(rv[m]), 1e-30)):.2e}"
    return None


def no_csm(fn):
    """fn() under the dispatcher without csm (the reference the kernel is checked against)."""
    from cusoftmax import _topk
    keep, D.TOPK_CSM_KP_MAX = D.TOPK_CSM_KP_MAX, 0
    _topk._cache.clear()
    try:
        return fn()
    finally:
        D.TOPK_CSM_KP_MAX = keep
        _topk._cache.clear()


def sweep():
    rng = np.random.default_rng(0)
    n = bad = 0
    t0 = time.time()
    for dt in ("float32", "bfloat16", "float16"):
        for R, L in ((1, 32768), (3, 50001), (8, 16384), (2, 65536 + 7)):
            for style in ("normal", "ties", "sorted", "wide", "specials", "neginf", "equal", "grouped"):
                a = np.zeros((R, L + 3)) if style == "equal" else \
                    make_data(rng, (R, L + 3), "normal" if style == "grouped" else style)
                if style == "grouped":  # the top in few groups (packs q with q mod 512 < 4, first eighth)
                    c = np.arange(L + 3)
                    a[:, ((c // (16 // np.dtype(np.float32 if dt == "float32" else np.float16).itemsize))
                          % 512 < 4) & (c < L // 8)] += 50.0
                if style == "normal" and R > 1:
                    a[0, 7] = np.nan
                    a[-1] = -np.inf
                x = to_gpu(a, dt)
                for xs, tag in ((x[:, :L], "c"), (x[:, 3:], "mis")):
                    for k in (1, 5, 16, 17, 50, 64):
                        for CS in (1, 2, 4, 8):
                            if -(-(L + 8) // (16 // xs.itemsize)) // CS * 16 > 200 * 1024:
                                continue
                            log = (k + CS) % 2 == 0
                            ref = no_csm(lambda: cs.softmax_topk(xs, k, log=log))
                            run, v, i = launch(xs, k, CS, log)
                            v.fill(0)
                            i.fill(-1)
                            run()
                            n += 1
                            err = same(v, i, ref, log)
                            if err:
                                bad += 1
                                if bad <= 15:
                                    print(f"FAIL {dt} {R}x{L} {style} {tag} k={k} CS={CS} log={log}: {err}", flush=True)
    print(f"check: {n} cases, {bad} failed, {time.time() - t0:.0f} s", flush=True)


def times():
    for dt in ("float32", "bfloat16"):
        for R, L in ((1, 32768), (8, 32768), (64, 32768), (128, 32768), (1, 65536), (8, 65536), (1, 128256),
                     (8, 128256), (16, 128256), (64, 128256), (1, 262144), (8, 262144)):
            for k in (1, 5, 16, 17, 50):
                x = cp.random.RandomState(R + L + k).standard_normal((R, L), dtype=cp.float32).astype(
                    cp.dtype("bfloat16") if dt == "bfloat16" else cp.float32)
                from cusoftmax import _topk
                keep, D.TOPK_CSM_KP_MAX = D.TOPK_CSM_KP_MAX, 0  # the dispatcher without csm
                _topk._cache.clear()
                ref = cs.softmax_topk(x, k)
                lib = timeit(lambda: cs.softmax_topk(x, k))
                pl = D.plan_topk(R, L, k, dt, dt, device_info(0))
                D.TOPK_CSM_KP_MAX = keep
                _topk._cache.clear()
                pc = D.plan_topk(R, L, k, dt, dt, device_info(0))
                line = f"{dt:9} {R:>3}x{L:<7} k={k:<3} no-csm {lib:7.2f} ({pl.regime}) | plan {pc.regime} g{pc.grid}"
                for CS in (1, 2, 4, 8):
                    if -(-(L + 8) // (16 // x.itemsize)) // CS * 16 > 210 * 1024:
                        continue
                    run, v, i = launch(x, k, CS)
                    run()
                    err = same(v, i, ref)
                    t = timeit(run)
                    line += f" | cs{CS} {t:6.2f}{' WRONG' if err else ''}"
                print(line, flush=True)
    # pathological rows (the radix fallback)
    for style in ("sorted", "equal"):
        for R, L in ((1, 32768), (64, 32768)):
            a = np.zeros((R, L)) if style == "equal" else np.tile(np.arange(L, dtype=np.float64), (R, 1))
            x = cp.asarray(a.astype(np.float32))
            k = 50
            lib = timeit(lambda: cs.softmax_topk(x, k))
            line = f"{style:9} {R:>3}x{L:<7} k={k:<3} lib {lib:7.2f}"
            for CS in (1, 2, 4, 8):
                run, v, i = launch(x, k, CS)
                run()
                err = same(v, i, no_csm(lambda: cs.softmax_topk(x, k)))
                line += f" | cs{CS} {timeit(run):6.2f}{' WRONG' if err else ''}"
            print(line, flush=True)


def variants():
    """compile-time variants: staging by cp.async instead of bulk copies, pieces"""
    vs = [(), ("-DTOPK_CSM_NO_BULK",), ("-DTOPK_CSM_PIECE_PACKS=512",), ("-DTOPK_CSM_PIECE_PACKS=2048",),
          ("-DTOPK_CSM_PIECES=4",)]
    for dt, R, L, k in (("float32", 1, 32768, 1), ("float32", 1, 32768, 50), ("float32", 8, 32768, 50),
                        ("float32", 64, 32768, 1), ("float32", 64, 32768, 50), ("bfloat16", 1, 32768, 50),
                        ("float32", 8, 128256, 50), ("bfloat16", 64, 128256, 50)):
        x = cp.random.RandomState(R + L + k).standard_normal((R, L), dtype=cp.float32).astype(
            cp.dtype("bfloat16") if dt == "bfloat16" else cp.float32)
        ref = no_csm(lambda: cs.softmax_topk(x, k))
        pl = D.plan_topk(R, L, k, dt, dt, device_info(0))
        CS = pl.grid[0] if pl.regime == "csm" else 8
        line = f"{dt:9} {R:>3}x{L:<7} k={k:<3} cs{CS}:"
        for o in vs:
            run, v, i = launch(x, k, CS, opts=o)
            run()
            err = same(v, i, ref)
            line += f" | {' '.join(o) or 'default'} {timeit(run):6.2f}{' WRONG' if err else ''}"
        print(line, flush=True)


def phases():
    """the kernel compiled to end early (-DTOPK_CSM_STOP: 9 after the launch and
    start barrier, 10 once the staged row has landed); tools/csm_trace.py has
    the whole timeline"""
    for dt in ("float32",):
        for R, L, k, CS in ((1, 32768, 5, 8), (1, 32768, 50, 8), (1, 32768, 50, 1), (1, 32768, 50, 2),
                            (64, 32768, 50, 2), (8, 128256, 50, 8)):
            x = cp.random.RandomState(R + L + k).standard_normal((R, L), dtype=cp.float32)
            line = f"{dt:9} {R:>3}x{L:<7} k={k:<3} cs{CS}:"
            for stop in (9, 10, 0):
                run, v, i = launch(x, k, CS, stop=stop)
                line += f" {stop or 'full'} {timeit(run):6.2f}"
            print(line, flush=True)


def ab():
    """A/B of a topk_csm source edit: kernels/_old_topk.cu (the previous
    commit's topk.cu, copied by hand, not committed) against the current
    source and its compile-time variants, on the dispatcher's csm plans;
    alternating, 3 rounds of a median of 30; results checked against the
    dispatcher without csm"""
    vs = [("old", (), "_old_topk.cu"), ("new", (), "topk.cu"),
          ("new-c8", ("-DTOPK_CSM_COARSE_K=8",), "topk.cu"),
          ("new-tp2", ("-DTOPK_CSM_TAU_PARTS=2",), "topk.cu"),
          ("new-tp1", ("-DTOPK_CSM_TAU_PARTS=1",), "topk.cu")]
    for dt, R, L, k in (("float32", 1, 32768, 1), ("float32", 1, 32768, 5), ("float32", 1, 32768, 50),
                        ("float32", 8, 32768, 5), ("float32", 8, 32768, 50), ("float32", 64, 32768, 5),
                        ("float32", 64, 32768, 50), ("float32", 1, 128256, 50), ("float32", 8, 128256, 5),
                        ("float32", 8, 128256, 50), ("float32", 1, 262144, 50), ("float32", 8, 262144, 5),
                        ("bfloat16", 64, 128256, 5), ("bfloat16", 64, 128256, 50), ("bfloat16", 1, 32768, 50),
                        ("float32", 1, 32768, 10), ("float32", 8, 32768, 16)):
        x = cp.random.RandomState(R + L + k).standard_normal((R, L), dtype=cp.float32).astype(
            cp.dtype("bfloat16") if dt == "bfloat16" else cp.float32)
        ref = no_csm(lambda: cs.softmax_topk(x, k))
        pl = D.plan_topk(R, L, k, dt, dt, device_info(0))
        CS = pl.grid[0] if pl.regime == "csm" else 8
        runs, ts = {}, {}
        line = f"{dt:9} {R:>3}x{L:<7} k={k:<3} cs{CS} ({pl.regime}):"
        for lab, o, src in vs:
            run, v, i = launch(x, k, CS, opts=o, src=src)
            run()
            err = same(v, i, ref)
            runs[lab] = run
            ts[lab] = []
            if err:
                line += f" {lab} WRONG ({err[:80]})"
        for _ in range(3):
            for lab, _o, _s in vs:
                ts[lab].append(timeit(runs[lab]))
        line += " | " + " | ".join(f"{lab} {min(t):6.2f}" for lab, t in ts.items())
        print(line, flush=True)


def ncu_one(k):
    """three launches of 1 x 32768 float32 at cluster size 8, for a profiler:
    ncu --kernel-name regex:topk_csm --launch-skip 2 --launch-count 1 \
        --section SourceCounters --page source --csv --print-source sass \
        python tools/csm_try.py ncu <k>"""
    x = cp.random.RandomState(1).standard_normal((1, 32768), dtype=cp.float32)
    run, v, i = launch(x, k, 8)
    for _ in range(3):
        run()
    cp.cuda.runtime.deviceSynchronize()


if __name__ == "__main__":
    what = sys.argv[1:] or ["check", "time"]
    if "check" in what:
        sweep()
    if "time" in what:
        times()
    if "phases" in what:
        phases()
    if "ncu" in what:
        ncu_one(int(what[what.index("ncu") + 1]))
    if "variants" in what:
        variants()
    if "ab" in what:
        ab()
