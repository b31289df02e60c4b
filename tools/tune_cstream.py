"""Cluster-streamed long backward rows (softmax_backward_cstream) against
the plans they would replace, with torch's times (one device run).

For many long rows the one-block-per-row stream re-reads a row from DRAM:
between its two passes every SM has a whole row in flight, more than L2
holds once rows reach a few hundred KB. A cluster per row gives each block a
slice, so the re-read window is 1 / CLUSTER as large. It times the
dispatcher's plan, the one-block stream at 512 / 1024 threads and the
cluster stream at 2 / 4 / 8 blocks of 512 / 1024 threads. CUDA events,
median of 30, L2 flushed before every repetition (tools/tune.py timeit);
every candidate's output is checked against the float64 reference on two
rows first.

A forward cluster stream (softmax_cstream, the online pass by a cluster per
row) was timed the same way (kernels/tune_cstream.txt, "fwd" lines, from
the tree before this tool's commit): within 3% of the dispatcher's plans
except 512 x 262144 bfloat16 log-softmax (290 vs 319 us), so it was not
kept. The y-preload sweep of the staged log-softmax kernel
(kernels/tune_smem_ypre.txt) ran here as ``--what smem``; the preload is
gone (the staged kernel now runs one row a block: tools/tune_bwd_occ.py).

    python tools/tune_cstream.py [--json out.json] [--log-only] [--shapes RxL,...]
"""
import argparse
import json

import cupy as cp

from cusoftmax import _dispatch as D
from cusoftmax._launch import device_info

from tune import timeit
from tune_sync_bwd import make, time_candidates

import numpy as np
from cusoftmax import reference as ref
from cusoftmax._backward import _launch_rows


def torch_time(kind, x, y=None, dy=None):
    try:
        import torch
        from bench._providers import torch_view
    except Exception:  # noqa: BLE001
        return float("nan")
    if kind == "fwd":
        tx = torch_view(x)
        return timeit(lambda: torch.softmax(tx, -1))
    ty, td = torch_view(y), torch_view(dy)
    f = torch._log_softmax_backward_data if kind == "log" else torch._softmax_backward_data
    return timeit(lambda: f(td, ty, -1, ty.dtype))


def show(line):
    print("    " + "; ".join(f"{n} {u:.1f}" for u, n in sorted(line)), flush=True)


def bwd_candidates(R, L, dt, dev, log):
    T = D.CTYPE[dt]
    LG = "true" if log else "false"
    pack = D.bwd_pack_width(dt, dt, dt)
    packs = -(-L // pack)
    head = f"{T}, {T}, {T}, {LG}, {pack}"
    out = [("dispatch", D.plan_backward_rows(R, L, dt, dt, dt, log, dev))]
    for th in (512, 1024):
        out.append((f"stream t{th}", D.LaunchPlan(
            "stream", D.BWD_SOURCE, f"softmax_backward_stream<{head}, {D.STREAM_UNROLL}, {th}, true>",
            (min(R, dev.sm_count * D.MAX_BLOCKS_PER_SM),), (th,), pack)))
    for cl in (2, 4, 8):
        for th in (512, 1024):
            cpk = -(-packs // cl)
            out.append((f"cstream c{cl} t{th}", D.LaunchPlan(
                "cstream", D.BWD_SOURCE, f"softmax_backward_cstream<{head}, {D.STREAM_UNROLL}, {th}, {cl}>",
                (min(R, dev.sm_count * D.MAX_BLOCKS_PER_SM // cl) * cl,), (th,), pack, extra=(cpk,), cluster=cl)))
    return out


def run_bwd(shapes, dts, dev, res, logs=(False, True), cands=None):
    cands = cands or bwd_candidates
    for dt in dts:
        for log in logs:
            rf = ref.log_softmax_backward if log else ref.softmax_backward
            for R, L in shapes:
                x = make(R, L, dt)
                y = cp.asarray((ref.log_softmax if log else ref.softmax)(x).astype(x.dtype))
                dy = make(R, L, dt, seed=1)
                dx = cp.empty_like(x)

                def call(ln):
                    dx.fill(0)
                    return lambda: _launch_rows(ln, y.data.ptr, dy.data.ptr, dx.data.ptr, R, L, L, L, L)

                def error():
                    return max(float(np.nanmax(np.abs(ref.to_float64(dx[i]) - rf(y[i], dy[i]))))
                               for i in (0, R - 1))

                tt = torch_time("log" if log else "sm", x, y, dy)

                line = []

                def record(name, plan, us):
                    line.append((us, name))
                    res.append(dict(op="log_softmax_backward" if log else "softmax_backward", shape=[R, L],
                                    dtype=dt, cand=name, kernel=plan.kernel, us=us, tbs=3 * x.nbytes / us / 1e6,
                                    torch_us=tt))

                time_candidates(f"bwd {'log' if log else 'sm '} {dt:8s} {R:>5}x{L:<7} torch {tt:8.1f}",
                                cands(R, L, dt, dev, log), call, error,
                                1e-4 if dt == "float32" else 5e-2, record)
                show(line)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--shapes", default="512x16384,512x65536,512x262144,4096x16384,4096x32768,4096x65536,"
                                        "4096x131072,4096x262144")
    ap.add_argument("--log-only", action="store_true", help="log_softmax_backward only")
    a = ap.parse_args()
    dev = device_info(0)
    shapes = [tuple(int(v) for v in t.split("x")) for t in a.shapes.split(",")]
    res = []
    run_bwd(shapes, a.dtypes.split(","), dev, res, (True,) if a.log_only else (False, True))
    if a.json:
        json.dump(res, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
