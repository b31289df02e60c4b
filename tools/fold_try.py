"""The folded sync kernel's NR and tile width (experiment): for each narrow
(O, L, I) with dense slabs, every fold plan (NR of COLS_FOLD_NR, 128- and
64-byte tiles) launched directly, against the dispatcher's plan without the
fold (COLS_FOLD_MIN_BYTES raised) and the same data contiguous; each result
checked against the float64 reference on a few columns. Min over --rounds
rounds (interleaved) of a median of 30, CUDA events, L2 flushed.
    PYTHONPATH=$PWD:$PWD/tools python3 tools/fold_try.py [--log] [--rounds 2] [--shapes 4000x1001,...]
"""
import argparse
import numpy as np, cupy as cp
import cusoftmax as cs
from cusoftmax import _dispatch as D, reference as ref
from cusoftmax._launch import Launch, device_info
from tune import min_over_rounds
from tune_cols import make

SHAPES = [(1, 1000, 1001), (1, 2000, 1001), (1, 4000, 1001), (1, 8000, 1001), (1, 16384, 255),
          (1, 4000, 1500), (1, 2000, 3001), (1, 1000, 5001)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", action="store_true")
    ap.add_argument("--dtypes", default="float32,bfloat16,float16")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--shapes", default=None)
    a = ap.parse_args()
    shapes = SHAPES if not a.shapes else [(1,) + tuple(int(n) for n in s.split("x")) for s in a.shapes.split(",")]
    dev = device_info(0)
    fn = cs.log_softmax if a.log else cs.softmax
    rf = ref.log_softmax if a.log else ref.softmax
    print(f"# {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, {'log_softmax' if a.log else 'softmax'}, "
          f"us (x contiguous-time ratio)", flush=True)
    for dt in a.dtypes.split(","):
        for O, L, I in shapes:
            x = make((O, L, I), dt)
            xc = make((O * I, L), dt)
            vec = 16 // x.dtype.itemsize
            while vec > 1 and I % vec:
                vec //= 2
            y = cp.empty_like(x)
            cols = sorted({0, 1, I // 2, I - 2, I - 1})
            r = rf(x[:, :, cols], axis=1)
            fs = {"contig": lambda: fn(xc, axis=-1)}
            save = D.COLS_FOLD_MIN_BYTES
            D.COLS_FOLD_MIN_BYTES = 1 << 60
            nf = D.plan_cols(O, L, I, dt, dt, a.log, dev, vec, True)
            D.COLS_FOLD_MIN_BYTES = save
            ln = Launch(nf, 0)
            fs["nofold " + nf.kernel.split("<")[0][13:]] = (
                lambda ln=ln: ln.cols(x.data.ptr, y.data.ptr, O, L, I, L * I, I, L * I, I))
            f = D.fold_factor(I, dt, dt)
            bad = []
            for seg in (128, 64):
                for nr in D.COLS_FOLD_NR:
                    p = D._plan_cols_sync(O, L // f, I * f, dt, dt, a.log, dev, 16 // x.dtype.itemsize, nr=nr,
                                          fold=f, segment=seg) if L % f == 0 and f > 1 else None
                    if p is None:
                        continue
                    ln = Launch(p, 0)
                    name = f"fold nr{nr} w{seg} g{p.grid[0]} s{p.extra[1]}"
                    call = (lambda ln=ln: ln.cols(x.data.ptr, y.data.ptr, O, L // f, I * f, L * I, I * f, L * I, I * f))
                    y.fill(np.nan)
                    call()
                    err = float(np.nanmax(np.abs(ref.to_float64(y[:, :, cols]) - r) / np.maximum(1, np.abs(r))))
                    if not err <= (1e-2 if dt != "float32" else 1e-5):
                        bad.append(name)
                    fs[name] = call
            auto = D.plan_cols(O, L, I, dt, dt, a.log, dev, vec, True)
            ts = min_over_rounds(fs, a.rounds)
            c = ts.pop("contig")
            print(f"{dt:9s} {(O, L, I)} contig {c:6.1f} | auto: {auto.kernel.split('<')[0][13:]} nr"
                  f"{auto.extra[3] if auto.sync else '-'} g{auto.grid} fold{auto.fold}"
                  + "".join(f" | {k} {v / c:.2f}x" for k, v in ts.items()) + (f" WRONG {bad}" if bad else ""),
                  flush=True)
            del x, xc, y
            cp.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    main()
