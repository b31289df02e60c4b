"""Sweep forward kernel configurations per shape (one device run).

For each shape and dtype, time the dispatcher's plan and hand-built
alternatives (warp lanes, block threads, cluster sizes, split counts, stream
shapes) with CUDA events, L2 flushed before every repetition, and print the
bandwidth of each (minimum traffic: read x + write y). Used to set the
thresholds in cusoftmax/_dispatch.py; results go to stdout / JSON.
"""
import argparse, json, math, sys
import numpy as np, cupy as cp
import cusoftmax as cs
from cusoftmax import _dispatch as D
from cusoftmax._launch import Launch, device_info

FLUSH = cp.empty(256 << 20, dtype=cp.uint8)


def timeit(fn, reps=30):
    ev = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(reps)]
    fn(); cp.cuda.runtime.deviceSynchronize()
    for a, b in ev:
        FLUSH.fill(1)
        a.record(); fn(); b.record()
    b.synchronize()
    return float(np.median([cp.cuda.get_elapsed_time(a, b) for a, b in ev])) * 1e3  # us


def min_over_rounds(fs, rounds):
    """{name: us}: each of ``fs`` ({name: callable}) timed by timeit once a
    round, the rounds interleaved (drift hits every candidate alike), the
    minimum over rounds kept."""
    ts = {k: [] for k in fs}
    for _ in range(rounds):
        for k, f in fs.items():
            ts[k].append(timeit(f))
    return {k: min(v) for k, v in ts.items()}


def candidates(R, L, dt, dev, log=False):
    T = D.CTYPE[dt]; pack = D.pack_width(dt, dt); npm = D.reg_elems(dt, dt) // pack
    LG = "true" if log else "false"
    packs = -(-L // pack); sms = dev.sm_count
    out = [("dispatch", D.plan_rows(R, L, dt, dt, log, dev))]
    src = "softmax.cu"
    if packs <= 32 * npm:
        for lanes in (4, 8, 16, 32):
            np_ = -(-packs // lanes)
            if np_ > npm or lanes * pack > 4 * L + 32: continue
            np_ = D._ladder(np_)
            rpb = 4 * (32 // lanes)
            for bpsm in (16, 32):
                out.append((f"warp l{lanes} np{np_} g{bpsm}", D.LaunchPlan("warp", src, f"softmax_warp<{T}, {T}, {LG}, {pack}, {np_}, {lanes}>",
                            (min(-(-R // rpb), sms * bpsm),), (128,), pack)))
    if 32 * npm // 4 < packs <= 1024 * npm:
        for th in (128, 256, 512, 1024):
            np_ = -(-packs // th)
            if np_ > npm or np_ < 1: continue
            np_ = D._ladder(np_)
            out.append((f"block t{th} np{np_}", D.LaunchPlan("block", src, f"softmax_block<{T}, {T}, {LG}, {pack}, {np_}, {th}>",
                        (min(R, sms * 32),), (th,), pack)))
    if packs > 1024 and packs <= 8 * 1024 * npm:
        for th in (256, 512, 1024):
            for cl in (2, 4, 8):
                np_ = -(-packs // (th * cl))
                if np_ > npm or np_ < 2: continue
                np_ = D._ladder(np_)
                out.append((f"cluster t{th} c{cl} np{np_}", D.LaunchPlan("cluster", src, f"softmax_cluster<{T}, {T}, {LG}, {pack}, {np_}, {th}, {cl}>",
                            (min(R, sms * 32 // cl) * cl,), (th,), pack)))
    if R < 4 * sms and packs >= 1024:
        C = "double" if dt == "float64" else "float"
        for bps in (2, 4, 8):
            splits = max(1, min(-(-packs // 256), -(-bps * sms // R)))
            pps = -(-packs // splits); splits = -(-packs // pps)
            for th in (256, 512):
                out.append((f"split bps{bps} s{splits} t{th}", D.LaunchPlan("split", src,
                    f"softmax_split_finish<{T}, {T}, {LG}, {pack}, 4, {th}>", (splits, R), (th,), pack,
                    pre_kernel=f"softmax_split_partial<{T}, {C}, {pack}, 4, {th}>", pre_grid=(splits, R),
                    ws_elems=2 * R * splits, ws_dtype="float64" if C == "double" else "float32", extra=(pps,))))
    if packs > 1024:
        for cl in (1, 2, 4, 8):
            if cl > 1 and dev.cc < 90: continue
            cpk = -(-packs // cl)
            if cpk > 7168 or cpk < 512: continue
            for th in (512, 1024):
                for stg in (2, 3, 4):
                    if stg * cpk * 16 > 224 * 1024: continue
                    ncl = min(R, sms // cl)
                    out.append((f"smem t{th} c{cl} s{stg}", D.LaunchPlan("smem", src, f"softmax_smem<{T}, {T}, {LG}, {pack}, {th}, {cl}, {stg}>",
                                (ncl * cl,), (th,), pack, extra=(cpk,), smem=stg * cpk * 16, cluster=cl)))
        for th, un in ((256, 4), (512, 4), (1024, 2), (512, 8)):
            out.append((f"stream t{th} u{un}", D.LaunchPlan("stream", src, f"softmax_stream<{T}, {T}, {LG}, ALGO_ONLINE, {pack}, {un}, {th}>",
                        (min(R, sms * 32),), (th,), pack)))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--large", action="store_true", help="only shapes with long rows")
    ap.add_argument("--log", action="store_true", help="log_softmax kernels instead of softmax")
    ap.add_argument("--shapes", default=None, help="RxL,RxL,... (overrides the shape list)")
    a = ap.parse_args()
    dev = device_info(0)
    shapes = [(262144, 128), (4096, 128), (4096, 512), (4096, 1024), (4096, 2048), (4096, 4096), (4096, 8192),
              (4096, 16384), (4096, 32768), (4096, 65536), (4096, 131072), (4096, 262144), (512, 8192),
              (64, 128256), (8, 128256), (1, 128256), (1, 32768), (8, 32768), (64, 32768), (1, 262144),
              (10, 1000000), (4096, 50257), (32, 151936), (64, 8192), (8, 4096)]
    if a.large:
        shapes = [(4096, 8192), (4096, 16384), (4096, 32768), (4096, 65536), (4096, 131072), (4096, 262144), (4096, 50257), (1024, 16384), (512, 65536)]
    if a.shapes:
        shapes = [tuple(int(v) for v in t.split("x")) for t in a.shapes.split(",")]
    res = []
    # copy ceiling
    big = cp.empty(1 << 30, cp.uint8); big2 = cp.empty_like(big)
    t = timeit(lambda: big2.__setitem__(Ellipsis, big), 10)
    print(f"copy 1GiB: {2 * big.nbytes / t / 1e6:.3f} TB/s", flush=True)
    del big, big2
    for dt in a.dtypes.split(","):
        for R, L in shapes:
            npdt = np.float32
            x = cp.random.standard_normal((R, L), dtype=cp.float32)
            if dt != "float32":
                x = x.astype(cp.float16) if dt == "float16" else x.astype(cp.float32).view(cp.uint32)
                if dt == "bfloat16":
                    import ml_dtypes
                    x = cp.asarray((x >> 16).astype(cp.uint16)).view(ml_dtypes.bfloat16)
            y = cp.empty_like(x)
            nbytes = 2 * x.nbytes
            best = None
            line = []
            for name, plan in candidates(R, L, dt, dev, a.log):
                try:
                    ln = Launch(plan, 0)
                except Exception as e:
                    print("compile fail", name, e); continue
                f = lambda: ln.rows(x.data.ptr, y.data.ptr, R, L, L, L)
                y.fill(0)
                try:
                    f(); cp.cuda.runtime.deviceSynchronize()
                except RuntimeError as e:
                    print("launch fail", name, str(e)[:200], flush=True); continue
                from cusoftmax import reference as ref
                idx = [0, R - 1]
                errv = max(float(np.nanmax(np.abs(ref.to_float64(y[i]) - (ref.log_softmax if a.log else ref.softmax)(x[i])))) for i in idx)
                if not errv < (2e-2 if dt != "float32" else 1e-5) * (8 if a.log else 1):
                    print(f"WRONG {name} err={errv}", flush=True)
                us = timeit(f)
                tbs = nbytes / us / 1e6
                res.append(dict(shape=[R, L], dtype=dt, log=a.log, cand=name, kernel=plan.kernel, us=us, tbs=tbs))
                line.append((us, name, tbs))
            line.sort()
            disp = [l for l in line if l[1] == "dispatch"][0]
            print(f"{dt:9s} {R:>6}x{L:<8} dispatch {disp[0]:8.1f}us {disp[2]:.2f}TB/s | best: " +
                  "; ".join(f"{n} {u:.1f}us {b:.2f}" for u, n, b in line[:3]), flush=True)
            del x, y
    if a.json:
        json.dump(res, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
