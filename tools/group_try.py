"""Column groups for strided layouts too large to hold on chip (experiment,
issue 2's 1.5x layout rule): does running an (L, I) slab (reduced over L) as
G groups of about I / G columns, each group's two passes back to back (its
re-read then hits L2), beat the one split stream over the whole slab?

Emulated, not implemented: each group is its own (L, Ig) array (Ig = I / G
rounded up to a 16-byte pack, so the plans are the aligned ones), and a
candidate is the G groups launched one after the other on the same stream
(one CUDA-event pair around all of them, L2 flushed once before). Candidates:
``split xG`` (the split stream's partial + finish on each group, at the folded
split stream's 16 blocks an SM and unroll 8), ``auto xG`` (the dispatcher's
choice for each group: a sync / cluster kernel where a group fits on chip),
against ``auto`` (the public call on the whole slab) and the same data
contiguous (``contig``). Ratios are to ``contig``. No output is checked here
(the kernels are the library's, on their own shapes; only the schedule is
new).
    PYTHONPATH=$PWD:$PWD/tools python3 tools/group_try.py [--log] [--rounds 2] [--shapes 16384x1001,...]
"""
import argparse
import numpy as np, cupy as cp
import cusoftmax as cs
from cusoftmax import _dispatch as D
from cusoftmax._launch import Launch, device_info
from tune import min_over_rounds
from tune_cols import make

SHAPES = [(8000, 1001), (16384, 1001), (30000, 1001), (8192, 4095), (6000, 3001), (12000, 2001),
          (2000, 3001), (1000, 5001), (2000, 1001)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", action="store_true")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--groups", default="1,2,3,4,6")
    ap.add_argument("--shapes", default=None)
    a = ap.parse_args()
    shapes = SHAPES if not a.shapes else [tuple(int(n) for n in s.split("x")) for s in a.shapes.split(",")]
    dev = device_info(0)
    fn = cs.log_softmax if a.log else cs.softmax
    print(f"# {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, {'log_softmax' if a.log else 'softmax'}, "
          f"us (x contiguous-time ratio)", flush=True)
    for dt in a.dtypes.split(","):
        for L, I in shapes:
            x = make((L, I), dt)
            xc = make((I, L), dt)
            y = cp.empty_like(x)
            v = 16 // x.dtype.itemsize
            fs = {"contig": lambda: fn(xc, axis=-1), "auto": lambda: fn(x, axis=0, out=y)}
            ap_ = D.plan_cols(1, L, I, dt, dt, a.log, dev, 1, True, True)
            notes = [f"auto={ap_.kernel.split('<')[0].replace('softmax_cols_', '')}"
                     + (f" fold{ap_.fold}" if ap_.fold > 1 else "")]
            keep = []
            for G in (int(g) for g in a.groups.split(",")):
                Ig = -(-(-(-I // G)) // v) * v
                xs = [make((L, Ig), dt) for _ in range(G)]
                ys = [cp.empty_like(t) for t in xs]
                keep += [xs, ys]
                p = D._plan_cols_split(1, L, Ig, dt, dt, a.log, dev, v, blocks_per_sm=16, unroll=8)
                ln = Launch(p, 0)

                def split(ln=ln, xs=xs, ys=ys, Ig=Ig):
                    for xg, yg in zip(xs, ys):
                        ln.cols(xg.data.ptr, yg.data.ptr, 1, L, Ig, L * Ig, Ig, L * Ig, Ig)

                def auto(xs=xs, ys=ys):
                    for xg, yg in zip(xs, ys):
                        fn(xg, axis=0, out=yg)
                fs[f"split x{G} g{p.grid}"] = split
                sub = D.plan_cols(1, L, Ig, dt, dt, a.log, dev, v, True, True)
                fs[f"auto x{G} ({sub.kernel.split('<')[0].replace('softmax_cols_', '')})"] = auto
            ts = min_over_rounds(fs, a.rounds)
            c = ts.pop("contig")
            print(f"{dt:9s} ({L}, {I}) {x.nbytes / 2**20:5.1f} MiB contig {c:6.1f} | {notes[0]} | "
                  + " | ".join(f"{k} {t:.1f} {t / c:.2f}x" for k, t in ts.items()), flush=True)
            del x, xc, y, keep
            cp.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    main()
