"""Measure the single-launch few-rows forward kernel (softmax_rowsync) and
the staged backward kernel (softmax_backward_smem) against the plans they
replace (one device run; sets the thresholds in cusoftmax/_dispatch.py).

Forward, few long rows: rowsync at several block sizes vs the two-launch
split and the cluster regime. Backward, many rows: smem at several blocks
per SM and stage counts vs the register (block / cluster) and stream plans.
CUDA events, median of 30, L2 flushed before every repetition (tools/tune.py
timeit). Every candidate's output is checked against the float64 reference
on two rows before it is timed.
"""
import argparse
import json

import numpy as np
import cupy as cp

from cusoftmax import _dispatch as D
from cusoftmax import reference as ref
from cusoftmax._backward import _launch_rows
from cusoftmax._launch import Launch, device_info

from tune import timeit


def make(R, L, dt, seed=0):
    rs = cp.random.RandomState(seed)
    x = rs.standard_normal((R, L), dtype=cp.float32)
    if dt == "bfloat16":
        import ml_dtypes
        x = cp.asarray(cp.asnumpy(x).astype(ml_dtypes.bfloat16))
    elif dt == "float16":
        x = x.astype(cp.float16)
    return x


def fwd_candidates(R, L, dt, dev, log):
    T = D.CTYPE[dt]
    LG = "true" if log else "false"
    pack = D.pack_width(dt, dt)
    npm = D.reg_elems(dt, dt) // pack
    if log:
        npm = min(npm, D.LOG_BLOCK_NP_MAX)
    packs = -(-L // pack)
    sms = dev.sm_count
    out = [("dispatch", D.plan_rows(R, L, dt, dt, log, dev))]
    saved = D.ROWSYNC_MIN_BLOCKS
    D.ROWSYNC_MIN_BLOCKS = 10 ** 9
    try:
        out.append(("previous", D.plan_rows(R, L, dt, dt, log, dev)))
    finally:
        D.ROWSYNC_MIN_BLOCKS = saved
    for th in (128, 256, 512, 1024):
        for frac in (1, 2):  # all SMs, half of them
            splits = max(1, sms // R // frac)
            per = -(-packs // splits)
            np_ = -(-per // th)
            if np_ > npm or (np_ < 1):
                continue
            np_ = D._ladder(np_, D.NP_LADDER_COARSE, npm)
            if th > 128 and np_ == 1 and -(-per // (th // 2)) <= 1:
                continue  # half the threads would do
            sp = -(-packs // (np_ * th))
            out.append((f"rowsync t{th} np{np_} s{sp}",
                        D.LaunchPlan("rowsync", "softmax.cu", f"softmax_rowsync<{T}, {T}, {LG}, {pack}, {np_}, {th}>",
                                     (sp, R), (th,), pack, sync=True)))
    return out


def bwd_candidates(R, L, dt, dev, log):
    T = D.CTYPE[dt]
    LG = "true" if log else "false"
    pack = D.bwd_pack_width(dt, dt, dt)
    packs = -(-L // pack)
    sms = dev.sm_count
    head = f"{T}, {T}, {T}, {LG}, {pack}"
    out = [("dispatch", D.plan_backward_rows(R, L, dt, dt, dt, log, dev))]
    saved = D.BWD_SMEM_MIN_PACKS
    D.BWD_SMEM_MIN_PACKS = 10 ** 12
    try:
        out.append(("previous", D.plan_backward_rows(R, L, dt, dt, dt, log, dev)))
    finally:
        D.BWD_SMEM_MIN_PACKS = saved
    import os
    if os.path.exists(os.path.join(os.path.dirname(D.__file__), "..", "kernels", "_old_softmax_backward.cu")):
        prev = out[1][1]  # the same plan compiled from the previous commit's source (y loaded early)
        out.append(("old-code", D.LaunchPlan(prev.regime, "_old_softmax_backward.cu", prev.kernel, prev.grid,
                                             prev.block, prev.pack, prev.pre_kernel, prev.pre_grid, prev.ws_elems,
                                             prev.ws_dtype, prev.extra, prev.smem, prev.cluster)))
    # rows a warp or one block holds in registers: warp (32 lanes) vs block sizes
    npm = D.bwd_reg_elems(dt, dt, dt) // pack
    if packs <= 32 * npm:
        np_ = D._ladder(-(-packs // 32))
        out.append((f"warp l32 np{np_}", D.LaunchPlan(
            "warp", D.BWD_SOURCE, f"softmax_backward_warp<{head}, {np_}, 32>",
            (min(-(-R // 4), sms * D.MAX_BLOCKS_PER_SM),), (D.WARP_KERNEL_THREADS,), pack)))
    if packs <= D.MAX_BLOCK_THREADS * npm:
        for th in (128, 256, 512, 1024):
            np_ = -(-packs // th)
            if np_ > npm or (th > 128 and -(-packs // (th // 2)) <= 1):
                continue
            np_ = D._ladder(np_)
            out.append((f"block t{th} np{np_}", D.LaunchPlan(
                "block", D.BWD_SOURCE, f"softmax_backward_block<{head}, {np_}, {th}, 1>",
                (min(R, sms * D.MAX_BLOCKS_PER_SM),), (th,), pack)))
    for rev in ("true", "false"):  # the write pass from the row's end back, or forward
        out.append((f"stream{' rev' if rev == 'true' else ''}", D.LaunchPlan(
            "stream", D.BWD_SOURCE, f"softmax_backward_stream<{head}, {D.STREAM_UNROLL}, {D.STREAM_THREADS}, {rev}>",
            (min(R, sms * D.MAX_BLOCKS_PER_SM),), (D.STREAM_THREADS,), pack)))
    arrs = 1 if log else 2
    for th in (256, 512, 1024):
        for st in (2, 3):
            smem = st * packs * 16 * arrs
            if smem > dev.max_smem:
                continue
            for bps in (1, 2, 4):
                if bps * (smem + 1024) > 228 * 1024 or bps * th > 2048:
                    continue
                out.append((f"smem t{th} s{st} b{bps}",
                            D.LaunchPlan("smem", D.BWD_SOURCE, f"softmax_backward_smem<{head}, {th}, {st}, 1>",
                                         (min(R, sms * bps),), (th,), pack, extra=(packs,), smem=smem)))
    return out


def time_candidates(tag, cands, make_call, error, tol, record):
    """Launch each (name, plan) of ``cands`` once through ``make_call(ln)``
    (a no-argument launch), skip it if it fails or ``error()`` (the worst
    difference from the reference) is not below ``tol``, else time it and
    ``record(name, plan, us)``; print the dispatch / previous times and the
    three fastest."""
    line = []
    for name, plan in cands:
        try:
            f = make_call(Launch(plan, 0))
            f()
            cp.cuda.runtime.deviceSynchronize()
        except Exception as e:  # noqa: BLE001
            print("fail", name, plan.kernel, str(e)[:300], flush=True)
            continue
        err = error()
        if not err < tol:
            print(f"WRONG {name} {plan.kernel} err={err}", flush=True)
            continue
        us = timeit(f)
        line.append((us, name))
        record(name, plan, us)
    line.sort()
    d = {n: u for u, n in line}
    print(f"{tag} dispatch {d.get('dispatch', 0):7.2f} previous {d.get('previous', 0):7.2f} | "
          + "; ".join(f"{n} {u:.2f}" for u, n in line[:3])
          + (f" | stream rev {d['stream rev']:.2f} fwd {d['stream']:.2f}" if 'stream' in d and 'stream rev' in d else ""),
          flush=True)


def run_fwd(shapes, dts, dev, res):
    for dt in dts:
        for log in (False, True):
            rf = ref.log_softmax if log else ref.softmax
            op = "log_softmax" if log else "softmax"
            for R, L in shapes:
                x = make(R, L, dt)
                y = cp.empty_like(x)

                def call(ln):
                    y.fill(0)
                    return lambda: ln.rows(x.data.ptr, y.data.ptr, R, L, L, L)

                def error():  # relative to max(1, |reference|): 16-bit log-probabilities are ~10
                    return max(float(np.nanmax(np.abs(ref.to_float64(y[i]) - rf(x[i]))
                                               / np.maximum(1, np.abs(rf(x[i]))))) for i in (0, R - 1))

                def record(name, plan, us):
                    res.append(dict(op=op, shape=[R, L], dtype=dt, cand=name, kernel=plan.kernel, us=us,
                                    tbs=2 * x.nbytes / us / 1e6))

                time_candidates(f"fwd {'log' if log else 'sm '} {dt:8s} {R:>5}x{L:<7}",
                                fwd_candidates(R, L, dt, dev, log), call, error,
                                1e-4 if dt == "float32" else 1e-2, record)


def run_bwd(shapes, dts, dev, res, logs=(False, True)):
    for dt in dts:
        for log in logs:
            rf = ref.log_softmax_backward if log else ref.softmax_backward
            op = "log_softmax_backward" if log else "softmax_backward"
            for R, L in shapes:
                x = make(R, L, dt)
                y = cp.asarray((ref.log_softmax if log else ref.softmax)(x).astype(x.dtype))
                dy = make(R, L, dt, seed=1)
                dx = cp.empty_like(x)

                def call(ln):  # the library's own rows launcher (split workspace, extra args, smem)
                    dx.fill(0)
                    return lambda: _launch_rows(ln, y.data.ptr, dy.data.ptr, dx.data.ptr, R, L, L, L, L)

                def error():
                    return max(float(np.nanmax(np.abs(ref.to_float64(dx[i]) - rf(y[i], dy[i]))))
                               for i in (0, R - 1))

                def record(name, plan, us):
                    res.append(dict(op=op, shape=[R, L], dtype=dt, cand=name, kernel=plan.kernel, us=us,
                                    tbs=3 * x.nbytes / us / 1e6))

                time_candidates(f"bwd {'log' if log else 'sm '} {dt:8s} {R:>5}x{L:<7}",
                                bwd_candidates(R, L, dt, dev, log), call, error,
                                1e-4 if dt == "float32" else 5e-2, record)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--what", default="fwd,bwd")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--bwd-shapes", default=None, help="RxL,RxL,... (backward shapes to time)")
    ap.add_argument("--log-only", action="store_true", help="backward: log_softmax_backward only")
    a = ap.parse_args()
    dev = device_info(0)
    res = []
    dts = a.dtypes.split(",")
    if "fwd" in a.what:
        shapes = [(1, 16384), (1, 32768), (1, 65536), (1, 128256), (1, 262144), (1, 1000000), (4, 128256),
                  (8, 32768), (8, 65536), (8, 128256), (8, 262144), (16, 65536), (32, 32768), (32, 65536),
                  (64, 16384), (64, 32768), (64, 65536)]
        run_fwd(shapes, dts, dev, res)
    if "bwd" in a.what:
        shapes = [(4096, 2048), (4096, 4096), (4096, 8192), (4096, 16384), (4096, 32000), (4096, 50257),
                  (512, 4096), (512, 8192), (512, 16384), (512, 32768), (1024, 8192)]
        if a.bwd_shapes:
            shapes = [tuple(int(v) for v in t.split("x")) for t in a.bwd_shapes.split(",")]
        run_bwd(shapes, dts, dev, res, (True,) if a.log_only else (False, True))
    if a.json:
        json.dump(res, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
