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
import cupy as cp
import cusoftmax as cs
from cusoftmax import _dispatch as D
from cusoftmax._launch import device_info
from tune import min_over_rounds
from cols_harness import add_common_args, case, parse_shapes, timed_calls

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
    add_common_args(ap)
    ap.add_argument("--min-nrs", type=int, default=8)
    ap.add_argument("--wide", action="store_true", help="also the other tile width (128 / 256 bytes) of aligned axes")
    a = ap.parse_args()
    shapes = parse_shapes(a.shapes, SHAPES)
    dev = device_info(0)
    fn = cs.log_softmax if a.log else cs.softmax
    print(f"# {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, {'log_softmax' if a.log else 'softmax'}, "
          f"us (x contiguous-time ratio)", flush=True)

    for dt in a.dtypes.split(","):
        for O, L, I in shapes:
            x, xc, y, cols, r = case(O, L, I, dt, a.log)
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
            fs, bad = timed_calls(fn, x, xc, y, cols, r, dt, a.log,
                                  ({"nobal": nobal} if nobal != auto else {}) | cands)
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
