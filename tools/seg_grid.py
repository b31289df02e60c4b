"""Grid shapes of the one-launch few-rows top-k (topk_seg): segments a row
(W), blocks a row and segments a block, against the dispatcher's plan. Each
variant's indices must equal the public call's, its values agree to 1e-5
relative (the (m, d) partials merge in another order); times are CUDA
events with the L2 flushed, median of 30 (tools/tune.py timeit), us.
    PYTHONPATH=.:tools python tools/seg_grid.py [R,L,k ...]"""
import sys

import numpy as np
import cupy as cp

import cusoftmax as cs
from cusoftmax import _dispatch as D, _topk
from cusoftmax._launch import device_info
from cusoftmax._loader import expanded_source, COMPILE_OPTIONS
from tune import timeit
from _util import np_dtype

WCAP = D.TOPK_SEG_WCAP
_mods = {}


def fn_of(kernel):
    if kernel not in _mods:
        _mods[kernel] = cp.RawModule(code=expanded_source("topk.cu"), options=COMPILE_OPTIONS,
                                     name_expressions=[kernel]).get_function(kernel)
    return _mods[kernel]


def run_case(R, L, k, dt, variants):
    x = cp.random.RandomState(R + L + k).standard_normal((R, L), dtype=cp.float32).astype(np_dtype(dt))
    ref = cs.softmax_topk(x, k)
    ref_i, ref_v = cp.asnumpy(ref.indices), cp.asnumpy(ref.values).astype(np.float64)
    lib = timeit(lambda: cs.softmax_topk(x, k))
    pl = D.plan_topk(R, L, k, dt, dt, device_info(0))
    line = f"{dt:9} {R:>3}x{L:<7} k={k:<3} lib {lib:7.2f} ({pl.regime} g{pl.grid} sp{pl.seg_packs})"
    pack = 16 // x.itemsize
    np_ = -(-(L + pack - 1) // pack)
    vals = cp.empty((R, k), x.dtype)
    idx = cp.empty((R, k), cp.int64)
    code = D.TOPK_OUT_CODE[dt]
    best = (lib, "lib")
    for label, sp, nb, unroll in variants(R, np_, k, pack):
        W = -(-np_ // sp)
        if W > WCAP or sp % 32:
            continue
        spb = -(-W // nb)
        S = -(-W // spb)
        wsk = cp.empty(R * WCAP * 8, np.uint8)
        wsv = cp.empty(R * WCAP, np.float32)
        wsm = cp.empty(2 * R * S, np.float32)
        cnt = cp.zeros(max(1024, R), np.uint32)
        kern = f"topk_seg<{D.CTYPE[dt]}, float, TOPK_ONLINE, {unroll}>"
        f = fn_of(kern)
        args = (x, vals, idx, wsk, wsv, wsm, cnt, np.int64(L), np.int64(L), np.int64(k),
                np.int64(D.topk_kp(k)), np.int64(sp), np.int64(spb), np.int64(code), np.int64(0))
        vals.fill(0)
        idx.fill(-1)
        f((S, R), (256,), args)
        ok = np.array_equal(cp.asnumpy(idx), ref_i) and np.allclose(
            cp.asnumpy(vals).astype(np.float64), ref_v, rtol=1e-5 if dt == "float32" else 1e-2, atol=0)
        t = timeit(lambda: f((S, R), (256,), args))
        line += f" | {label} W{W} g{S} {t:6.2f}{'' if ok else ' WRONG'}"
        if ok and t < best[0]:
            best = (t, f"{label} W{W} g{S}")
    print(line + f" || best {best[1]} {best[0]:.2f}", flush=True)


def variants(R, np_, k, pack):
    out = []
    unr = 16 // pack
    res = 4 * 132  # resident blocks (62 registers: 4 a SM)
    for Wt in (64, 128, 256):
        if Wt < 2 * k:
            continue
        sp = 32 * -(-np_ // (32 * Wt))
        W = -(-np_ // sp)
        one = -(-W // 8)  # a segment a warp
        nbs = {one, max(1, min(one, res // R)), max(1, min(one, 2 * res // R)), max(1, min(one, res // (2 * R)))}
        for nb in sorted(nbs):
            out.append((f"W{Wt}b{nb}", sp, nb, unr))
    return out


def main():
    shapes = [tuple(int(v) for v in a.split(",")) for a in sys.argv[1:]] or [
        (1, 32768, 1), (1, 32768, 50), (8, 32768, 50), (64, 32768, 1), (64, 32768, 50), (1, 262144, 50),
        (8, 128256, 50), (8, 262144, 50), (64, 128256, 1), (64, 128256, 50), (64, 262144, 1), (64, 262144, 50)]
    for dt in ("float32", "bfloat16"):
        for R, L, k in shapes:
            run_case(R, L, k, dt, variants)


if __name__ == "__main__":
    main()
