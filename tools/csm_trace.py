"""Timeline of topk_csm inside one launch: the kernel compiled with
-DTOPK_CSM_TRACE stamps %globaltimer (ns, shared by all SMs) at points 0-10 in
thread 0 of every block; per launch (L2 flushed before it), each point's
latest block relative to the earliest block start, median over the launches
(us). Beside it the same launch timed by CUDA events without the hooks
(tune.timeit: L2 flushed, median of 30).
    PYTHONPATH=.:tools:tests python tools/csm_trace.py
Points: 0 entry, 1 bulk copies issued, 2 thread 0's scan done, 3 start
barrier waited, 4 group maxima and (m, d) sent, 5 exchange barrier; k > 1:
6 tau, 7 candidates filtered into block 0's slots, 8 counts exchanged,
9 before block 0's ranking; 11, 12 block 0's fast ranking (candidates copied, ranks known;
"n": their number); 10 end (block 0, after its writes).
Also printed: block 0's clock64 cycles between consecutive points."""
ORDER = tuple(range(10)) + (11, 12, 10)  # 11, 12: block 0's fast ranking (copy done, ranks known)
import sys

import numpy as np
import cupy as cp

from cusoftmax import _dispatch as D
from cusoftmax._loader import expanded_source, COMPILE_OPTIONS
from tune import timeit, FLUSH
from csm_try import launch

_mods = {}


def module(kernel, opts=()):
    if (kernel, opts) not in _mods:
        _mods[kernel, opts] = cp.RawModule(code=expanded_source("topk.cu"),
                                           options=COMPILE_OPTIONS + ("-DTOPK_CSM_TRACE",) + opts,
                                           name_expressions=[kernel])
    return _mods[kernel, opts]


def trace(R, L, k, CS, dt="float32", reps=15, warm_code=False, opts=()):
    """Prints the timeline of topk_csm<dt, CS> on a random (R, L) row block."""
    x = cp.random.RandomState(R + L + k).standard_normal((R, L), dtype=cp.float32).astype(
        cp.dtype("bfloat16") if dt == "bfloat16" else cp.float32)
    base = timeit(launch(x, k, CS, opts=opts)[0])
    isz = x.itemsize
    pack = 16 // isz
    ppb = -(-(-(-(L + pack - 1) // pack)) // CS)
    smem = ppb * 16
    kern = f"topk_csm<{D.CTYPE[dt]}, {CS}>"
    mod = module(kern, opts)
    f = mod.get_function(kern)
    if f.max_dynamic_shared_size_bytes < smem:
        f.max_dynamic_shared_size_bytes = smem
    g = mod.get_global("csm_trace")
    tr = cp.ndarray((64, 16, 16, 2), cp.uint64, g)
    vals = cp.empty((R, k), x.dtype)
    idx = cp.empty((R, k), cp.int64)
    args = (np.uint64(x.data.ptr), vals, idx, np.int64(L), np.int64(L), np.int64(k), np.int64(ppb),
            np.int64(D.TOPK_OUT_CODE[dt]), np.int64(0))
    x2 = x.copy()
    args2 = (np.uint64(x2.data.ptr),) + args[1:]
    rows = min(R, 64)
    pts, cyc, ns = [], [], []
    for _ in range(reps):
        tr.fill(0)
        FLUSH.fill(1)
        if warm_code:  # the same launch on a copy of x: code in L2, x not
            f((CS, R), (512,), args2, shared_mem=smem)
        cp.cuda.runtime.deviceSynchronize()
        f((CS, R), (512,), args, shared_mem=smem)
        cp.cuda.runtime.deviceSynchronize()
        t = cp.asnumpy(tr[:rows, :CS, :, 0]).astype(np.int64)  # (rows, CS, point)
        t0 = t[:, :, 0].min()
        lat = []
        ns.append(int(np.median(t[:, 0, 13])) if t[:, 0, 13].any() else -1)  # block 0's candidates (fast path)
        for p in range(13):
            v = t[:, :, p]
            v = v[v > 0]
            lat.append((v.max() - t0) / 1e3 if v.size else np.nan)
        pts.append(lat)
        ck = cp.asnumpy(tr[0, 0, :, 1]).astype(np.int64)  # block 0 of row 0: clock64
        st = cp.asnumpy(tr[0, 0, :, 0]).astype(np.int64)
        seq = [p for p in ORDER if st[p] > 0]
        cyc.append({(a, b): ck[b] - ck[a] for a, b in zip(seq, seq[1:])})
    with np.errstate(all="ignore"):
        med = np.nanmedian(np.array(pts), axis=0)
    keys = cyc[0].keys()
    print(f"{dt:9} {R:>3}x{L:<7} k={k:<3} cs{CS}{' code warm' if warm_code else ''}{' '.join(opts)}: events {base:6.2f} | " +
          " ".join(f"{p}:{med[p]:5.2f}" for p in ORDER if not np.isnan(med[p]))
          + (f" | n {int(np.median(ns))}" if max(ns) >= 0 else ""), flush=True)
    print("   block 0 cycles: " + " ".join(f"{a}->{b}:{int(np.median([c[(a, b)] for c in cyc if (a, b) in c]))}"
                                         for a, b in keys), flush=True)


if __name__ == "__main__":
    for R, L, k, CS, dt in ((1, 32768, 1, 8, "float32"), (1, 32768, 5, 8, "float32"), (1, 32768, 50, 8, "float32"),
                            (8, 32768, 50, 8, "float32"), (64, 32768, 1, 2, "float32"), (64, 32768, 50, 2, "float32"),
                            (1, 32768, 50, 1, "float32"), (1, 262144, 50, 8, "float32"), (8, 128256, 50, 8, "float32"),
                            (64, 128256, 50, 2, "bfloat16")):
        trace(R, L, k, CS, dt)
    for o in sys.argv[1:]:
        if o.startswith("-D"):
            for R, L, k, CS in ((1, 32768, 1, 8), (1, 32768, 50, 8), (8, 32768, 50, 8), (64, 32768, 50, 2)):
                trace(R, L, k, CS, "float32", opts=(o,))
    if "warm" in sys.argv[1:]:
        for R, L, k, CS in ((1, 32768, 1, 8), (1, 32768, 50, 8), (64, 32768, 50, 2), (1, 262144, 50, 8)):
            trace(R, L, k, CS, "float32", warm_code=True)
