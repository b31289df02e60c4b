"""Where softmax_cols_cl's time goes on the small strided arrays that miss
issue 2's 1.5x layout rule ((1000, 1000) float32, (2048, 1024) 16-bit, ...).

    PYTHONPATH=.:tools:tests python tools/cl_phase.py [--shapes OxLxI,...] [--dtypes ...] [--rounds 3]

Per shape, the cluster plan (the dispatcher's, or _plan_cols_cl forced) and,
all timed alternately (CUDA events, L2 flushed before every repetition,
tools/tune.py timeit; the minimum over rounds of a median of 30), in us:
  contig  cusoftmax.softmax on the same elements as contiguous rows
  ccopy   a contiguous copy of the same bytes (one 16-byte pack a thread)
  scopy   a copy with the cl kernel's access pattern (grid (CL, tiles), NR
          packs a thread loaded at the axis stride, then stored), no cluster
  scopyC  the same copy launched in clusters of CL (no exchange)
  scopyG  scopy with a grid barrier between every block's loads and any
          block's stores (all blocks resident)
  stop1   the cl kernel ended after the block's own partials (COLS_CL_STOP=1:
          the loads and the block reduction, no exchange, no store)
  stop2   ended after the cluster exchange (COLS_CL_STOP=2: no store)
  stop3   everything but the stores (COLS_CL_STOP=3)
  nocl    the cl kernel built for clusters of 1 on the same grid (each block
          normalises by its own rows: wrong output, the time without the
          cluster and its exchange)
  full    the cl kernel (the library's build), checked against the reference
With --ab: kernels/_old_softmax.cu (the previous commit's source, copied by
hand; its kernel has no NT parameter) against the current source, the cl
plan, alternating, each checked against the reference.
With --trace: the cl plan built with -DCOLS_CL_TRACE (thread 0 of every
block stamps %globaltimer at entry, loads reduced, cluster start barrier,
partials exchanged, totals, its stores issued, the block's stores issued):
per point the median and the latest block, relative to the first entry.
With --nt: instead of the phases, the cl kernel at NR 4 / 8 / 16 and one or
two tiles a cluster (NT), each checked against the reference ("WRONG" if not).
"""
import argparse
import dataclasses
import re

import numpy as np
import cupy as cp

import cusoftmax as cs
from cusoftmax import _dispatch as D, reference as ref
from cusoftmax._launch import Launch, device_info
from cusoftmax._loader import expanded_source, COMPILE_OPTIONS
from tune import min_over_rounds, timeit
from tune_cols import make
from narrow_try import fn_of

SHAPES = [(1, 1000, 1000), (1, 2048, 1024), (1, 512, 512)]
COPY_SRC = r'''
__global__ void ccopy(const uint4* __restrict__ x, uint4* __restrict__ y, long long n) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i];
}
// the same with every block's loads landed before any block stores (a grid
// barrier on a counter that only grows: launches on one stream, all blocks resident)
template <int NR>
__global__ void scopyG(const uint4* __restrict__ x, uint4* __restrict__ y, long long L, long long I16, int TX,
                       unsigned* cnt) {
  const int tx = threadIdx.x % TX, ly = threadIdx.x / TX, NY = blockDim.x / TX;
  const long long i = (long long)blockIdx.y * TX + tx, l0 = (long long)blockIdx.x * NY * NR + ly;
  uint4 v[NR];
  unsigned acc = 0;
#pragma unroll
  for (int u = 0; u < NR; ++u)
    if (i < I16 && l0 + u * NY < L) { v[u] = x[(l0 + u * NY) * I16 + i]; acc ^= v[u].x; }
  if (__syncthreads_or(acc == 0x9e3779b9u) && threadIdx.x == 0) cnt[1] = acc;  // loads landed
  if (threadIdx.x == 0) {
    const unsigned nb = gridDim.x * gridDim.y;
    const unsigned old = atomicAdd(cnt, 1u), target = (old / nb + 1) * nb;
    while ((int)(*(volatile unsigned*)cnt - target) < 0) __nanosleep(64);
  }
  __syncthreads();
  if (i >= I16) return;
#pragma unroll
  for (int u = 0; u < NR; ++u)
    if (l0 + u * NY < L) y[(l0 + u * NY) * I16 + i] = v[u];
}
template <int NR, int CL>
__global__ void __cluster_dims__(CL, 1, 1)
scopy(const uint4* __restrict__ x, uint4* __restrict__ y, long long L, long long I16, int TX) {
  const int tx = threadIdx.x % TX, ly = threadIdx.x / TX, NY = blockDim.x / TX;
  const long long i = (long long)blockIdx.y * TX + tx, l0 = (long long)blockIdx.x * NY * NR + ly;
  if (i >= I16) return;
  uint4 v[NR];
#pragma unroll
  for (int u = 0; u < NR; ++u)
    if (l0 + u * NY < L) v[u] = x[(l0 + u * NY) * I16 + i];
#pragma unroll
  for (int u = 0; u < NR; ++u)
    if (l0 + u * NY < L) y[(l0 + u * NY) * I16 + i] = v[u];
}
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default=None, help="OxLxI,...")
    ap.add_argument("--dtypes", default="float32,bfloat16,float16")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--log", action="store_true")
    ap.add_argument("--nt", action="store_true", help="NR x NT variants instead of the phases")
    ap.add_argument("--ab", action="store_true", help="_old_softmax.cu against the current source")
    ap.add_argument("--trace", action="store_true", help="in-kernel timeline (-DCOLS_CL_TRACE)")
    a = ap.parse_args()
    dev = device_info(0)
    shapes = SHAPES if a.shapes is None else [tuple(int(v) for v in s.split("x")) for s in a.shapes.split(",")]
    print(f"# {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}; us, min over {a.rounds} rounds of a "
          f"median of 30 (L2 flushed)", flush=True)
    for dt in a.dtypes.split(","):
        for O, L, I in shapes:
            x = make((O, L, I), dt)
            y = cp.empty_like(x)
            xc = make((O * I, L), dt)
            fn = cs.log_softmax if a.log else cs.softmax
            vec = 16 // x.dtype.itemsize
            plan = dplan = D.plan_cols(O, L, I, dt, dt, a.log, dev, vec)
            forced = not plan.kernel.startswith("softmax_cols_cl")
            if forced:
                plan = D._plan_cols_cl(O, L, I, dt, dt, a.log, dev, vec)
                if plan is None:
                    print(f"{dt:9s} {(O, L, I)}: no cl plan", flush=True)
                    continue
            if a.trace:
                trace(a, dt, O, L, I, x, y, plan, forced)
                continue
            if a.ab:
                ab(a, dt, O, L, I, x, y, xc, fn, vec, dev, plan, forced)
                continue
            if a.nt:
                nt_variants(a, dt, O, L, I, x, y, xc, fn, vec, dev, dplan)
                continue
            tx, cl, tiles, nr = plan.extra
            args = (x.data.ptr, y.data.ptr, O, L, I, L * I, I, L * I, I, np.int32(tx))
            nocl = re.sub(r", (\d+), (\d+), (\d+)>$", lambda m: f", 1, {m.group(2)}, {m.group(3)}>", plan.kernel)
            full = Launch(plan, 0)
            f_full = lambda: full.cols(*args[:-1])
            y.fill(0)
            f_full()
            cols = sorted({0, 1, I // 2, I - 1})
            r = (ref.log_softmax if a.log else ref.softmax)(x[:, :, cols], axis=1)
            err = float(np.nanmax(np.abs(ref.to_float64(y[:, :, cols]) - r)))
            n16 = x.nbytes // 16
            i16 = I * x.dtype.itemsize // 16
            cc = fn_of("ccopy", None, code=COPY_SRC)
            sc = fn_of(f"scopy<{nr}, 1>", None, code=COPY_SRC)
            scC = fn_of(f"scopy<{nr}, {cl}>", None, code=COPY_SRC)
            f1 = fn_of(plan.kernel, "softmax.cu", ("-DCOLS_CL_STOP=1",))
            f2 = fn_of(plan.kernel, "softmax.cu", ("-DCOLS_CL_STOP=2",))
            f3 = fn_of(plan.kernel, "softmax.cu", ("-DCOLS_CL_STOP=3",))
            fn1 = fn_of(nocl, "softmax.cu")
            scG = fn_of(f"scopyG<{nr}>", None, code=COPY_SRC)
            gcnt = cp.zeros(2, cp.uint32)
            cands = {
                "contig": lambda: fn(xc, axis=-1),
                "ccopy": lambda: cc((-(-n16 // 256),), (256,), (x, y, np.int64(n16))),
                "scopy": lambda: sc(plan.grid, plan.block, (x, y, np.int64(O * L), np.int64(i16), np.int32(tx))),
                "scopyC": lambda: scC(plan.grid, plan.block, (x, y, np.int64(O * L), np.int64(i16), np.int32(tx))),
                "scopyG": lambda: scG(plan.grid, plan.block, (x, y, np.int64(O * L), np.int64(i16), np.int32(tx),
                                                              gcnt)),
                "stop1": lambda: f1(plan.grid, plan.block, args),
                "stop2": lambda: f2(plan.grid, plan.block, args),
                "stop3": lambda: f3(plan.grid, plan.block, args),
                "nocl": lambda: fn1(plan.grid, plan.block, args),
                "full": f_full,
            }
            best = min_over_rounds(cands, a.rounds)
            print(f"{dt:9s} {(O, L, I)} {'forced ' if forced else ''}cl nr{nr} c{cl} grid {plan.grid}: "
                  + " | ".join(f"{k} {t:5.1f}" for k, t in best.items())
                  + f" || full/contig {best['full'] / best['contig']:.2f}x err {err:.1e}", flush=True)
            cp.get_default_memory_pool().free_all_blocks()


TRACE_POINTS = ("entry", "reduced", "cl-wait", "exchanged", "totals", "stored(t0)", "stored(blk)")


def trace(a, dt, O, L, I, x, y, plan, forced, reps=15):
    """Per launch (L2 flushed first): each point's time relative to the
    earliest block entry, its median and latest block; medians over launches."""
    from tune import FLUSH
    mod = cp.RawModule(code=expanded_source("softmax.cu"), options=COMPILE_OPTIONS + ("-DCOLS_CL_TRACE",),
                       name_expressions=[plan.kernel])
    f = mod.get_function(plan.kernel)
    tr = cp.ndarray((1024, 8), cp.uint64, mod.get_global("cl_trace"))
    args = (x.data.ptr, y.data.ptr, O, L, I, L * I, I, L * I, I, np.int32(plan.extra[0]))
    nb = min(1024, plan.grid[0] * plan.grid[1])
    t_plain = timeit(lambda: Launch(plan, 0).cols(*args[:-1]))
    t_traced = timeit(lambda: f(plan.grid, plan.block, args))
    med, last = [], []
    for _ in range(reps):
        FLUSH.fill(1)
        tr.fill(0)
        f(plan.grid, plan.block, args)
        cp.cuda.runtime.deviceSynchronize()
        t = tr[:nb, :len(TRACE_POINTS)].get().astype(np.int64)
        t = (t - t[:, 0].min()) / 1e3  # us
        med.append(np.median(t, axis=0))
        last.append(t.max(axis=0))
    med, last = np.median(med, axis=0), np.median(last, axis=0)
    print(f"{dt:9s} {(O, L, I)}{' log' if a.log else ''} {'forced ' if forced else ''}cl nr{plan.extra[3]} "
          f"c{plan.extra[1]} grid {plan.grid}: events {t_plain:.1f} us (traced {t_traced:.1f}); us from the first "
          f"entry, median block / last block: " + " | ".join(
              f"{n} {m:.2f}/{l:.2f}" for n, m, l in zip(TRACE_POINTS, med, last)), flush=True)


def ab(a, dt, O, L, I, x, y, xc, fn, vec, dev, plan, forced):
    cols = sorted({0, 1, I // 2, I - 1})
    r = (ref.log_softmax if a.log else ref.softmax)(x[:, :, cols], axis=1)
    tol = (1e-5 if dt == "float32" else 2e-2) * (8 if a.log else 1)  # (log: |y| up to ~8)
    old = dataclasses.replace(plan, source="_old_softmax.cu", kernel=re.sub(r", \d+>$", ">", plan.kernel))
    fs, errs, outs = {"contig": lambda: fn(xc, axis=-1)}, {}, {}
    for k, p in (("old", old), ("new", plan)):
        ln = Launch(p, 0)
        fs[k] = lambda ln=ln: ln.cols(x.data.ptr, y.data.ptr, O, L, I, L * I, I, L * I, I)
        y.fill(0)
        fs[k]()
        outs[k] = y.copy()
        errs[k] = float(np.nanmax(np.abs(ref.to_float64(y[:, :, cols]) - r)))
    b = min_over_rounds(fs, a.rounds)
    same = bool(cp.array_equal(outs["old"], outs["new"], equal_nan=True))
    print(f"{dt:9s} {(O, L, I)}{' log' if a.log else ''} {'forced ' if forced else ''}cl nr{plan.extra[3]} "
          f"c{plan.extra[1]}: contig {b['contig']:5.1f} | old {b['old']:5.1f} {b['old'] / b['contig']:.2f}x | new "
          f"{b['new']:5.1f} {b['new'] / b['contig']:.2f}x | {b['old'] / b['new']:.3f}x faster, err "
          f"{errs['old']:.1e} / {errs['new']:.1e}, same {same}"
          + (" WRONG" if max(errs.values()) > tol else ""), flush=True)
    cp.get_default_memory_pool().free_all_blocks()


def nt_variants(a, dt, O, L, I, x, y, xc, fn, vec, dev, plan):
    cols = sorted({0, 1, I // 2, I - 1})
    r = (ref.log_softmax if a.log else ref.softmax)(x[:, :, cols], axis=1)
    tol = 1e-5 if dt == "float32" else 2e-2
    short = plan.kernel.split("<")[0].replace("softmax_cols_", "")
    cands = {"contig": (lambda: fn(xc, axis=-1), None), f"dispatch[{short}]": (None, plan)}
    for nr in D.COLS_CL_NR:
        for nt in (1, 2):
            p = D._plan_cols_cl(O, L, I, dt, dt, a.log, dev, vec, nr, nt=nt)
            if p is not None:
                cands[f"nr{nr}c{p.extra[1]}nt{nt}"] = (None, p)
    fs, errs = {}, {}
    for k, (f, p) in cands.items():
        if p is not None:
            ln = Launch(p, 0)
            f = lambda ln=ln: ln.cols(x.data.ptr, y.data.ptr, O, L, I, L * I, I, L * I, I)
            y.fill(0)
            f()
            errs[k] = float(np.nanmax(np.abs(ref.to_float64(y[:, :, cols]) - r)))
        fs[k] = f
    best = min_over_rounds(fs, a.rounds)
    print(f"{dt:9s} {(O, L, I)} contig {best['contig']:5.1f}: " + " | ".join(
        f"{k} {t:5.1f} {t / best['contig']:.2f}x" + (" WRONG" if errs.get(k, 0) > tol else "")
        for k, t in best.items() if k != "contig"), flush=True)
    cp.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    main()
