"""softmax_cols_sync's splits (issue 2's 1.5x layout rule), experiment: the
kernel shares the reduced axis evenly among any number of splits (at most NR
packs a thread), so a plan may split further than NR needs to balance its
rounds (the dispatcher's COLS_SYNC_BALANCE). For each (O, L, I) reduced over
L, time the public call (``auto``), the dispatcher's plan without balancing
(``nobal``), and the sync plan the dispatcher builds (plain or skewed) at
every distinct packs-a-thread from the NR's
own down to --min-nrs (``w<tile bytes> s<splits> n<packs a thread>
r<rounds>``; --wide: the other of 128- and 256-byte tiles too), each
against the same data contiguous (``contig``). Every candidate's output (a
strided subset of columns above 2^24 elements) is checked against the
float64 reference after poisoning y. Min over --rounds rounds (interleaved)
of a median of 30, CUDA events, L2 flushed. (kernels/sync_balance.txt's
first run printed an ``m<cost>`` of a cost model since dropped.)
    PYTHONPATH=$PWD:$PWD/tools python3 tools/sync_balance_try.py [--log] [--rounds 2] [--shapes 4000x1500,...]
"""
import argparse
import dataclasses
import numpy as np, cupy as cp
import cusoftmax as cs
from cusoftmax import _dispatch as D, reference as ref
from cusoftmax._launch import Launch, device_info
from tune import min_over_rounds
from tune_cols import make

SHAPES = [(1, 3000, 1500), (1, 4000, 1500), (1, 4000, 1200), (1, 4000, 1800), (1, 3000, 1000), (1, 6000, 1000),
          (1, 4000, 2500), (1, 2000, 3001), (1, 8000, 1001), (1, 1200, 4001), (1, 5000, 3000)]


def cap_of(p, dev):
    """Blocks of sync plan ``p`` resident at once (its MINB an SM)."""
    return int(p.kernel.split(", ")[6]) * dev.sm_count


def with_splits(p, s, dev, isz):
    """Plan ``p`` (a sync plan) at ``s`` splits: the grid the dispatcher
    would give it (whole tiles a round, all resident)."""
    tx, _, tiles, r = p.extra
    cap = cap_of(p, dev)
    if s > cap:
        return None
    grid = min((cap // s) * s, tiles * s)
    w = tx * 16 // isz
    return dataclasses.replace(p, grid=(grid,), extra=(tx, s, tiles, r), ws_elems=2 * tiles * s * w)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", action="store_true")
    ap.add_argument("--dtypes", default="float32,bfloat16,float16")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--shapes", default=None)
    ap.add_argument("--min-nrs", type=int, default=8)
    ap.add_argument("--wide", action="store_true", help="also the other tile width (128 / 256 bytes) of aligned axes")
    a = ap.parse_args()
    shapes = SHAPES if not a.shapes else [
        tuple(int(n) for n in s.split("x")) if s.count("x") == 2 else (1,) + tuple(int(n) for n in s.split("x"))
        for s in a.shapes.split(",")]
    dev = device_info(0)
    fn = cs.log_softmax if a.log else cs.softmax
    rf = ref.log_softmax if a.log else ref.softmax
    tol = {"float32": 1e-5, "bfloat16": 1e-2, "float16": 1e-2}
    print(f"# {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, {'log_softmax' if a.log else 'softmax'}, "
          f"us (x contiguous-time ratio)", flush=True)

    def err_of(y, r, cols):
        got = ref.to_float64(y[:, :, cols])
        if np.isnan(got).any():
            return float("inf")
        if a.log:
            return float(np.max(np.abs(got - r) / np.maximum(1, np.abs(r))))
        return float(np.max(np.abs(got - r)))

    for dt in a.dtypes.split(","):
        for O, L, I in shapes:
            x = make((O, L, I), dt)
            xc = make((O * I, L), dt)
            y = cp.empty_like(x)
            big = x.size > (1 << 24)
            cols = np.arange(0, I, max(1, I // 64)) if big else slice(None)
            r = rf(x[:, :, cols], axis=1)
            vec = 16 // x.dtype.itemsize
            while vec > 1 and I % vec:
                vec //= 2
            auto = D.plan_cols(O, L, I, dt, dt, a.log, dev, vec, True, True)
            D.COLS_SYNC_BALANCE = False
            nobal = D.plan_cols(O, L, I, dt, dt, a.log, dev, vec, True, True)
            D.COLS_SYNC_BALANCE = True
            label = lambda p: (p.kernel.split("<")[0].replace("softmax_cols_", "")
                               + (f" s{p.extra[1]}" if p.sync else f" g{p.grid}"))
            cands = {}
            bases = []
            if nobal.sync and nobal.fold == 1:
                bases.append(nobal)
                if a.wide and vec * x.dtype.itemsize == 16 and not nobal.kernel.endswith("false, true>"):
                    other = 128 if nobal.extra[0] * 16 == 256 else 256  # the other tile width
                    w = D._plan_cols_sync(O, L, I, dt, dt, a.log, dev, vec, nr=nobal.extra[3], segment=other,
                                          balance=False)
                    if w is not None:
                        bases.append(w)
            for b in bases:
                tag = f"w{b.extra[0] * 16} "
                tx, s0, tiles, nr = b.extra
                ny = D.COLS_SYNC_THREADS // tx
                rows = -(-L // ny)
                seen = set()
                for n in range(-(-rows // s0), a.min_nrs - 1, -1):
                    s = -(-rows // n)
                    if s in seen:
                        continue
                    seen.add(s)
                    p = with_splits(b, s, dev, x.dtype.itemsize)
                    if p is None or s > D.COLS_SYNC_MAX_SPLITS:
                        continue
                    rounds = -(-tiles * s // p.grid[0])
                    cands[f"{tag}s{s} n{-(-rows // s)} r{rounds}"] = p

            def check(call):
                y.fill(np.nan)
                call()
                return err_of(y, r, cols) <= tol[dt]

            fs = {"contig": lambda: fn(xc, axis=-1), "auto": lambda: fn(x, axis=1, out=y)}
            bad = [] if check(fs["auto"]) else ["auto"]
            if nobal != auto:
                ln0 = Launch(nobal, 0)
                fs["nobal"] = lambda ln0=ln0: ln0.cols(x.data.ptr, y.data.ptr, O, L, I, L * I, I, L * I, I)
            for name, p in cands.items():
                ln = Launch(p, 0)
                call = (lambda ln=ln: ln.cols(x.data.ptr, y.data.ptr, O, L, I, L * I, I, L * I, I))
                if not check(call):
                    bad.append(name)
                fs[name] = call
            ts = min_over_rounds(fs, a.rounds)
            c = ts.pop("contig")
            print(f"{dt:9s} {(O, L, I)} contig {c:6.1f} | auto = {label(auto)} {ts.pop('auto') / c:.2f}x"
                  + (f" | nobal = {label(nobal)} {ts.pop('nobal') / c:.2f}x" if "nobal" in ts else "")
                  + " | " + " | ".join(f"{k} {t / c:.2f}x" for k, t in ts.items())
                  + (f" WRONG {bad}" if bad else ""), flush=True)
            del x, xc, y
            cp.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    main()
