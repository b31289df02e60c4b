"""Strided-axis plan oracle (issue 2's 1.5x layout rule): for each (dtype,
O, L, I) case, time the public call (``auto``) and every plan the
dispatcher's plan functions can build for it (cluster plans at every pack
width, NR and tile width; sync plans; the skewed choosers; fold, split fold,
split; instantiations that spill on sm_90 left out), launched directly, each
checked against the float64 reference with y poisoned first (wrong ones are
listed and not timed), against the same elements as contiguous rows. Prints
a line a case: auto's ratio and plan, the best candidates' ratios, then the
three best plans. Each case runs in its own process (a candidate that faults
loses only its case). Min over --rounds interleaved rounds of a median of 30,
CUDA events, L2 flushed (tools/tune.py timeit).
    PYTHONPATH=$PWD:$PWD/tools python3 tools/cols_oracle.py --cases bfloat16:2000x1200,float32:1x4000x300 [--log]
    PYTHONPATH=$PWD:$PWD/tools python3 tools/cols_oracle.py --sweep FILE [--over 1.5]   (cases of a layout_table output)
First used as exp/oracle.py (stop 42, kernels/cl_fill.txt, where that script is embedded); this tool also
launches the folded plans reshaped, as the library does (the experiment launched them unfolded and faulted).
"""
import argparse, itertools, re, subprocess, sys

ISZ = {"float32": 4, "bfloat16": 2, "float16": 2}


def parse_cases(a):
    """[(dtype, O, L, I)] from --cases or the lines of a layout_table output over --over."""
    out = []
    if a.cases:
        for c in a.cases.split(","):
            dt, shp = c.split(":")
            n = [int(v) for v in shp.split("x")]
            out.append((dt,) + tuple([1] * (3 - len(n)) + n))
    if a.sweep:
        for line in open(a.sweep):
            m = re.match(r"(\w+)\s+\((\d+), (\d+), (\d+)\): contig\s+[\d.]+\s+strided\s+[\d.]+\s+([\d.]+)x", line)
            if m and float(m.group(5)) > a.over:
                out.append((m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4))))
    return list(dict.fromkeys(out))


def layout(I, dt):
    """(vec, dense, skew) of a C-contiguous (O, L, I) array at an aligned base."""
    isz = ISZ[dt]
    vec = 1
    while vec * 2 * isz <= 16 and I % (vec * 2) == 0:
        vec *= 2
    return vec, True, (I * isz) % 16 != 0


def candidates(O, L, I, dt, log, dev, cl16=False):
    """[(name, plan)]: every distinct plan the plan functions build for the case."""
    from cusoftmax import _dispatch as D
    vec, dense, skew = layout(I, dt)
    c = {}

    def add(name, fn):
        try:
            p = fn()
        except Exception:  # an infeasible parameter set
            return
        if p is not None:
            c.setdefault((p.kernel, p.grid, p.block, p.smem, p.extra, p.fold, p.mid_kernel), (name, p))

    add("auto", lambda: D.plan_cols(O, L, I, dt, dt, log, dev, vec, dense, skew))
    for v, nr, seg in itertools.product(sorted({vec, max(1, vec // 2), 1}, reverse=True), (4, 8, 16, 32),
                                        (32, 64, 128, 256)):
        add(f"cl v{v} nr{nr} s{seg}", lambda: D._plan_cols_cl(O, L, I, dt, dt, log, dev, vec, nr=nr, v=v, segment=seg))
        if cl16:  # H100's non-portable clusters of 16 (--cl16)
            add(f"cl16 v{v} nr{nr} s{seg}", lambda: D._plan_cols_cl(O, L, I, dt, dt, log, dev, vec, nr=nr, v=v,
                                                                    segment=seg, clusters=(16,)))
    if skew:
        # (vec 1: listed even where plan_cols skips it, COLS_SKEW_ONLY_WIDER)
        add("clsk (chooser)", lambda: D._choose_cols_skew(O, L, I, dt, dt, log, dev))
        add("syncsk (chooser)", lambda: D._choose_cols_sync_skew(O, L, I, dt, dt, log, dev))
        for nr, seg in itertools.product((4, 8, 16), (128, 256)):
            add(f"syncsk nr{nr} s{seg}", lambda: D._plan_cols_sync(O, L, I, dt, dt, log, dev, 1, nr=nr, segment=seg,
                                                                   sk=True))
    for v, nr, seg in itertools.product(sorted({vec, 1}), (4, 16), (64, 128, 256)):
        add(f"sync v{v} nr{nr} s{seg}", lambda: D._plan_cols_sync(O, L, I, dt, dt, log, dev, vec, nr=nr, segment=seg,
                                                                  v=v))
    if dense:
        for nr in (None, 4, 16):
            add(f"fold nr{nr}", lambda: D._plan_cols_fold(O, L, I, dt, dt, log, dev, vec, nr=nr))
        add("split_fold", lambda: D._plan_cols_split_fold(O, L, I, dt, dt, log, dev))
        add("wide", lambda: D._plan_cols_wide(O, L, I, dt, dt, log, dev, dense))
    add("split", lambda: D._plan_cols_split(O, L, I, dt, dt, log, dev, vec))
    if dense and O == 1:  # the whole-slab kernel (cooperative; sm_90)
        add("slab", lambda: D._plan_cols_slab(L, I, dt, log, dev))
    return list(c.values())


def _spills_of(names):
    from cusoftmax._compile_check import compile_batch
    return {r.name for r in compile_batch("softmax.cu", names, "sm_90") if r.spill_stores or r.spill_loads}


def _load(name):
    from cusoftmax import _loader
    _loader.get_kernel("softmax.cu", name, 0)  # (compiled into CuPy's disk cache for the case processes)


def prepare(names, workers=14):
    """The kernels of ``names`` that spill on sm_90 (NVRTC, -Xptxas -v); the
    others compiled and cached, both in parallel processes."""
    import multiprocessing as mp
    names = sorted(names)
    with mp.get_context("spawn").Pool(workers) as pool:
        bad = set().union(*pool.map(_spills_of, [names[i:i + 8] for i in range(0, len(names), 8)]))
        pool.map(_load, [n for n in names if n not in bad])
    return bad


def run_case(dt, O, L, I, log, rounds, bad_k, cl16=False):
    import cusoftmax as cs
    from cusoftmax._launch import device_info
    from tune import min_over_rounds
    from cols_harness import case, timed_calls
    dev = device_info(0)
    cands = candidates(O, L, I, dt, log, dev, cl16)
    plans = {n: p for n, p in cands if n != "auto" and not set(p.kernels()) & bad_k}
    auto = dict(cands)["auto"]
    fn = cs.log_softmax if log else cs.softmax
    x, xc, y, cols, r = case(O, L, I, dt, log)
    fs, wrong = timed_calls(fn, x, xc, y, cols, r, dt, log, plans, skip=True)
    ts = min_over_rounds(fs, rounds)
    c, au = ts.pop("contig"), ts.pop("auto")
    good = sorted((t, k) for k, t in ts.items())
    print(f"{dt:9s} {(O, L, I)} contig {c:6.1f} auto {au:6.1f} {au / c:.2f}x [{auto.kernel} grid {auto.grid}] | "
          + " | ".join(f"{k} {t / c:.2f}x" for t, k in good[:6]) + f" | n {len(good)}"
          + (f" WRONG {wrong}" if wrong else ""), flush=True)
    for t, k in good[:3]:
        print(f"    {k}: {plans[k].kernel} grid {plans[k].grid} block {plans[k].block} extra {plans[k].extra}",
              flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default=None, help="dtype:LxI or dtype:OxLxI, comma-separated")
    ap.add_argument("--sweep", default=None, help="a tools/layout_table.py output: its cases over --over")
    ap.add_argument("--over", type=float, default=1.5)
    ap.add_argument("--log", action="store_true")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--cl16", action="store_true", help="also cluster plans of 16 blocks")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)  # (internal: one case, this process)
    ap.add_argument("--spills", default="", help=argparse.SUPPRESS)  # (internal: the spilling kernels, ';'-separated)
    a = ap.parse_args()
    if a.one:
        dt, O, L, I = a.one.split(":")
        return run_case(dt, int(O), int(L), int(I), a.log, a.rounds, set(filter(None, a.spills.split(";"))),
                        a.cl16)
    import cupy as cp
    from cusoftmax._launch import device_info
    dev = device_info(0)
    cases = parse_cases(a)
    bad = prepare({k for dt, O, L, I in cases for _, p in candidates(O, L, I, dt, a.log, dev, a.cl16)
                   for k in p.kernels()})
    print(f"# {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, {'log_softmax' if a.log else 'softmax'}, "
          "us; ratio = time / contig", flush=True)
    print(f"# spilling candidates left out: {sorted(bad)}", flush=True)
    for dt, O, L, I in cases:
        rc = subprocess.run([sys.executable, __file__, "--one", f"{dt}:{O}:{L}:{I}", "--rounds", str(a.rounds),
                             "--spills", ";".join(sorted(bad))] + (["--log"] if a.log else [])
                            + (["--cl16"] if a.cl16 else [])).returncode
        if rc:
            print(f"{dt:9s} {(O, L, I)} FAILED (exit {rc}: a candidate faulted; see above)", flush=True)


if __name__ == "__main__":
    main()
