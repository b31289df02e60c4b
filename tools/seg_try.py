"""The one-launch few-rows top-k regime (topk_seg): correctness sweep against
the reference (tests/test_topk.py's check) and timings against the split
regime and over block sizes (CUDA events, L2 flushed, median of 30).
Usage: PYTHONPATH=.:tools:tests python tools/seg_try.py [check] [time]"""
import sys
import time

import numpy as np
import cupy as cp

import cusoftmax as cs
from cusoftmax import _dispatch as D, _topk
from tune import timeit
from test_topk import check, make_data, to_gpu
from _util import np_dtype


def regime(R, L, k, dt="float32"):
    from cusoftmax._launch import device_info
    return D.plan_topk(R, L, k, dt, dt, device_info(0)).regime


def sweep():
    rng = np.random.default_rng(0)
    n = bad = nseg = 0
    t0 = time.time()
    for dt in ("float32", "bfloat16", "float16", "float64"):
        for R, L in ((1, 8192 * 4), (3, 50001), (8, 128256), (2, 262147), (5, 40000)):
            for style in ("normal", "ties", "sorted", "wide", "specials", "neginf", "equal"):
                a = np.zeros((R, L + 3)) if style == "equal" else make_data(rng, (R, L + 3), style)
                if style == "normal" and R > 1:
                    a[0, 7] = np.nan
                    a[-1] = -np.inf
                x = to_gpu(a, dt)
                for xs, tag in ((x[:, :L], "c"), (x[:, 3:], "mis")):
                    for k in (1, 5, 50, 64):
                        log, algo = k % 2 == 0, ("unfused" if k == 5 else "auto")
                        n += 1
                        nseg += regime(R, L, k, dt) == "seg"
                        try:
                            check(xs, k, log=log, algorithm=algo)
                        except AssertionError as e:
                            bad += 1
                            if bad <= 12:
                                print(f"FAIL {dt} {R}x{L} {style} {tag} k={k} log={log} {algo} "
                                      f"({regime(R, L, k, dt)}): {str(e)[:300]}", flush=True)
    print(f"check: {n} cases ({nseg} on the seg plan), {bad} failed, {time.time() - t0:.0f} s", flush=True)


def times():
    shapes = [(1, 32768, 1), (1, 32768, 50), (1, 128256, 1), (1, 128256, 5), (1, 128256, 50),
              (1, 262144, 50), (8, 32768, 50), (8, 128256, 50), (8, 262144, 50), (64, 32768, 5),
              (64, 32768, 50), (64, 128256, 5), (64, 128256, 50), (64, 262144, 50), (128, 131072, 50),
              (263, 65536, 50)]
    confs = [("split", 0, 256), ("seg", 64, 256)]
    for dt in ("float32", "bfloat16"):
        for R, L, k in shapes:
            x = cp.random.RandomState(R + L + k).standard_normal((R, L), dtype=cp.float32).astype(np_dtype(dt))
            line = f"{dt:9} {R:>4}x{L:<7} k={k:<3}"
            for name, kpmax, thr in confs:
                D.TOPK_SEG_KP_MAX, D.TOPK_SEG_THREADS = kpmax, thr
                _topk._cache.clear()
                cs.softmax_topk(x, k)
                p = next(v for kk, v in _topk._cache.items() if kk[0] == x.shape and kk[3] == k)
                t = timeit(lambda: cs.softmax_topk(x, k))
                line += f" | {name} {t:7.2f} ({p.plan.regime} g{p.plan.grid})"
            print(line, flush=True)
    D.TOPK_SEG_KP_MAX, D.TOPK_SEG_THREADS = 64, 256
    _topk._cache.clear()


def times2():
    """threads x batch elements x segments per warp, float32 and bfloat16"""
    shapes = [(1, 32768, 1), (1, 32768, 50), (1, 128256, 1), (1, 128256, 50), (1, 262144, 50), (8, 32768, 50), (8, 128256, 50), (8, 262144, 50), (64, 32768, 50), (64, 128256, 5),
              (64, 128256, 50), (64, 262144, 50), (128, 131072, 50), (263, 65536, 50)]
    confs = [(256, 256, b) for b in (4, 8, 16)]
    for dt in ("float32", "bfloat16"):
        for R, L, k in shapes:
            x = cp.random.RandomState(R + L + k).standard_normal((R, L), dtype=cp.float32).astype(np_dtype(dt))
            line = f"{dt:9} {R:>4}x{L:<7} k={k:<3}"
            for t, e, sw in confs:
                D.TOPK_SEG_THREADS, D.TOPK_SEG_WMAX, D.TOPK_SEG_BLOCKS_PER_SM = t, e, sw
                _topk._cache.clear()
                cs.softmax_topk(x, k)
                tt = timeit(lambda: cs.softmax_topk(x, k))
                line += f" | b{sw} {tt:6.2f}"
            print(line, flush=True)
    D.TOPK_SEG_THREADS, D.TOPK_SEG_WMAX, D.TOPK_SEG_BLOCKS_PER_SM = 256, 512, 8
    _topk._cache.clear()


def rows():
    """the dispatcher's plan against the one without the seg regime, more rows"""
    shapes = [(264, 32768, 50), (264, 32768, 16), (512, 32000, 16), (4096, 4096, 50), (4096, 16384, 16), (512, 32000, 5), (512, 32000, 50), (512, 50257, 50), (1024, 32768, 50),
              (2048, 32768, 5), (2048, 32768, 50), (4096, 32000, 50), (4096, 131072, 5), (4096, 131072, 50),
              (512, 16384, 50), (1024, 8192, 50)]
    for dt in ("float32", "bfloat16"):
        for R, L, k in shapes:
            x = cp.random.RandomState(R + L + k).standard_normal((R, L), dtype=cp.float32).astype(np_dtype(dt))
            line = f"{dt:9} {R:>4}x{L:<7} k={k:<3}"
            for name, kpmax in (("no seg", 0), ("dispatch", 64)):
                D.TOPK_SEG_KP_MAX = kpmax
                _topk._cache.clear()
                _topk._counters.clear()
                cs.softmax_topk(x, k)
                p = next(v for kk, v in _topk._cache.items() if kk[0] == x.shape and kk[3] == k)
                tt = timeit(lambda: cs.softmax_topk(x, k))
                line += f" | {name} {tt:8.2f} ({p.plan.regime} g{p.plan.grid})"
            print(line, flush=True)
    D.TOPK_SEG_KP_MAX = 64
    _topk._cache.clear()


if __name__ == "__main__":
    what = sys.argv[1:] or ["check", "time"]
    if "check" in what:
        sweep()
    if "time" in what:
        times()
    if "time2" in what:
        times2()
    if "rows" in what:
        rows()

