"""The split stream's FOLD form (experiment): for each narrow (O, L, I) with
dense slabs, the split stream on the slab read as (L / f, I x f) (16-byte
packs; the finish kernel merges the f reshaped columns of each original
column), at 128-byte tiles (64 lost wherever the form wins:
kernels/split_fold.txt), 16 or 8 blocks an SM and the finish kernel's unroll
8 or 4, against the dispatcher's plan (``auto``: the public call), its plan
without the folded split stream (``before``, where that differs) and the same
data contiguous.
Every candidate's whole output (a strided subset of columns for arrays over
2^24 elements) is checked against the float64 reference after poisoning y.
Min over --rounds rounds (interleaved) of a median of 30, CUDA events, L2
flushed.
    PYTHONPATH=$PWD:$PWD/tools python3 tools/split_fold_try.py [--log] [--rounds 2] [--shapes 8000x1001,...]
"""
import argparse
import numpy as np, cupy as cp
import cusoftmax as cs
from cusoftmax import _dispatch as D, reference as ref
from cusoftmax._launch import Launch, device_info
from tune import min_over_rounds
from tune_cols import make

SHAPES = [(1, 1000, 1001), (1, 2000, 1001), (1, 4000, 1001), (1, 8000, 1001), (1, 16384, 255),
          (1, 4000, 1500), (1, 2000, 3001), (1, 1000, 5001), (1, 16384, 1001), (4, 4000, 1001),
          (1, 8192, 4095), (1, 30000, 1001), (1, 16384, 1002), (1, 16384, 1500), (4, 8000, 1001),
          (1, 6000, 3001), (1, 12000, 2001)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", action="store_true")
    ap.add_argument("--dtypes", default="float32,bfloat16,float16")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--shapes", default=None)
    a = ap.parse_args()
    shapes = SHAPES if not a.shapes else [
        tuple(int(n) for n in s.split("x")) if s.count("x") == 2 else (1,) + tuple(int(n) for n in s.split("x"))
        for s in a.shapes.split(",")]
    dev = device_info(0)
    fn = cs.log_softmax if a.log else cs.softmax
    rf = ref.log_softmax if a.log else ref.softmax
    print(f"# {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, {'log_softmax' if a.log else 'softmax'}, "
          f"us (x contiguous-time ratio)", flush=True)
    for dt in a.dtypes.split(","):
        for O, L, I in shapes:
            f = D.fold_factor(I, dt, dt)
            if f == 1 or L % f:
                print(f"{dt:9s} {(O, L, I)}: no fold (f {f})", flush=True)
                continue
            x = make((O, L, I), dt)
            xc = make((O * I, L), dt)
            y = cp.empty_like(x)
            big = x.size > (1 << 24)
            cols = np.arange(0, I, max(1, I // 64)) if big else slice(None)
            r = rf(x[:, :, cols], axis=1)
            tol = 1e-2 if dt != "float32" else 1e-5

            def check(call):
                y.fill(np.nan)
                call()
                got = ref.to_float64(y[:, :, cols])
                if a.log:
                    err = float(np.max(np.abs(got - r) / np.maximum(1, np.abs(r))))
                else:
                    err = float(np.max(np.abs(got - r)))
                return err <= tol and not np.isnan(got).any()

            L2, I2, v = L // f, I * f, 16 // x.dtype.itemsize
            fs = {"contig": lambda: fn(xc, axis=-1)}
            auto = lambda: fn(x, axis=1, out=y)  # noqa: E731
            bad = [] if check(auto) else ["auto"]
            fs["auto"] = auto
            vec = v
            while vec > 1 and I % vec:
                vec //= 2
            ap_ = D.plan_cols(O, L, I, dt, dt, a.log, dev, vec, True, True)
            alabel = ap_.kernel.split("<")[0].replace("softmax_cols_", "") + (f" fold{ap_.fold}" if ap_.fold > 1 else "")
            save = D._plan_cols_split_fold  # the dispatcher without the folded split stream
            D._plan_cols_split_fold = lambda *args: None
            bp = D.plan_cols(O, L, I, dt, dt, a.log, dev, vec, True, True)
            D._plan_cols_split_fold = save
            if bp.kernel != ap_.kernel:
                bf = bp.fold
                bl = Launch(bp, 0)
                before = (lambda bl=bl, bf=bf: bl.cols(x.data.ptr, y.data.ptr, O, L // bf, I * bf, L * I, I * bf,
                                                       L * I, I * bf))
                if not check(before):
                    bad.append("before")
                fs["before " + bp.kernel.split("<")[0].replace("softmax_cols_", "")] = before
            for seg in (128,):
                for bps, unr in ((16, 8), (16, 4), (8, 4)):
                    p = D._plan_cols_split(O, L2, I2, dt, dt, a.log, dev, v, segment=seg, blocks_per_sm=bps,
                                           unroll=unr, fold=f)
                    ln = Launch(p, 0)
                    name = f"sfold w{seg} b{bps} u{unr} g{p.grid}"
                    call = (lambda ln=ln: ln.cols(x.data.ptr, y.data.ptr, O, L2, I2, L * I, I2, L * I, I2))
                    if not check(call):
                        bad.append(name)
                    fs[name] = call
            ts = min_over_rounds(fs, a.rounds)
            c = ts.pop("contig")
            print(f"{dt:9s} {(O, L, I)} contig {c:6.1f} | auto = {alabel} | " + " | ".join(f"{k} {v / c:.2f}x" for k, v in ts.items())
                  + (f" WRONG {bad}" if bad else ""), flush=True)
            del x, xc, y
            cp.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    main()
