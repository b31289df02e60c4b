"""The one-launch few-rows top-k regime (topk_seg): correctness sweep against
the reference (tests/test_topk.py's check) and timings against the split
regime, over blocks per SM and against the block regime on more rows (CUDA
events, L2 flushed, median of 30).
Usage: PYTHONPATH=.:tools:tests python tools/seg_try.py [check] [time] [time2] [rows]"""
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


def compare(shapes, confs):
    """Time softmax_topk on each shape under each (label, {dispatcher
    constant: value}) setting; the constants are restored afterwards."""
    names = {n for _, c in confs for n in c}
    saved = {n: getattr(D, n) for n in names}
    try:
        for dt in ("float32", "bfloat16"):
            for R, L, k in shapes:
                x = cp.random.RandomState(R + L + k).standard_normal((R, L), dtype=cp.float32).astype(np_dtype(dt))
                line = f"{dt:9} {R:>4}x{L:<7} k={k:<3}"
                for label, conf in confs:
                    for n, v in saved.items():
                        setattr(D, n, conf.get(n, v))
                    _topk._cache.clear()
                    cs.softmax_topk(x, k)
                    p = next(v for kk, v in _topk._cache.items() if kk[0] == x.shape and kk[3] == k)
                    t = timeit(lambda: cs.softmax_topk(x, k))
                    line += f" | {label} {t:8.2f} ({p.plan.regime} g{p.plan.grid})"
                print(line, flush=True)
    finally:
        for n, v in saved.items():
            setattr(D, n, v)
        _topk._cache.clear()


def times():
    """seg against the split regime it replaced (few long rows)"""
    compare([(1, 32768, 1), (1, 32768, 50), (1, 128256, 1), (1, 128256, 5), (1, 128256, 50), (1, 262144, 50),
             (8, 32768, 50), (8, 128256, 50), (8, 262144, 50), (64, 32768, 5), (64, 32768, 50), (64, 128256, 5),
             (64, 128256, 50), (64, 262144, 50), (128, 131072, 50), (263, 65536, 50)],
            [("split", {"TOPK_SEG_KP_MAX": 0}), ("seg", {})])


def times2():
    """blocks per SM of the seg regime"""
    compare([(1, 32768, 1), (1, 32768, 50), (1, 128256, 1), (1, 128256, 50), (1, 262144, 50), (8, 32768, 50),
             (8, 128256, 50), (8, 262144, 50), (64, 32768, 50), (64, 128256, 5), (64, 128256, 50),
             (64, 262144, 50), (128, 131072, 50), (263, 65536, 50)],
            [(f"b{b}", {"TOPK_SEG_BLOCKS_PER_SM": b}) for b in (4, 8, 16)])


def rows():
    """the dispatcher's plan against the one without the seg regime, more rows"""
    compare([(264, 32768, 50), (264, 32768, 16), (512, 32000, 16), (4096, 4096, 50), (4096, 16384, 16),
             (512, 32000, 5), (512, 32000, 50), (512, 50257, 50), (1024, 32768, 50), (2048, 32768, 5),
             (2048, 32768, 50), (4096, 32000, 50), (4096, 131072, 5), (4096, 131072, 50), (512, 16384, 50),
             (1024, 8192, 50)],
            [("no seg", {"TOPK_SEG_KP_MAX": 0}), ("dispatch", {})])


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

