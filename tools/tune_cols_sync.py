"""softmax_cols_sync (one launch, x read once) against the dispatcher's
current strided-axis plan and the same data contiguous.

For each (O, L, I) (reduction along L of a C-ordered array) and dtype: the
time of ``cusoftmax.softmax`` on the contiguous (O * I, L) rows, of the
dispatcher's plan, and of ``_plan_cols_sync`` at every NR of COLS_SYNC_NR
(checked against the float64 reference on three columns first). CUDA events,
L2 flushed, median of 30. Used to set where plan_cols takes the sync kernel.
"""
import argparse, json
import numpy as np, cupy as cp
import cusoftmax as cs
from cusoftmax import _dispatch as D, reference as ref
from cusoftmax._launch import Launch, device_info
from tune import timeit
from tune_cols import make

SHAPES = [(1, 2048, 4096), (1, 4096, 2048), (1, 1024, 8192), (1, 512, 16384), (1, 8192, 1024),
          (1, 16384, 512), (64, 512, 256), (8, 4096, 256), (1, 65536, 64), (1, 32768, 256),
          (1, 256, 32768), (1, 65536, 128), (1, 2048, 1024), (4, 262144, 64), (1, 4096, 8192),
          (1, 1000, 1000), (1, 200, 4096), (1, 512, 512), (1, 8192, 8192), (1, 16384, 4096)]


def case(O, L, I, dt, log, dev):
    """One (O, L, I) case of dtype dt: (t_contig, t_disp, cur, vec, run), the
    contiguous and dispatched times (us), the dispatcher's plan, the vector
    width, and run(plan) -> (us, rounds, ok, err) launching a strided-axis
    plan on the same data, checked against the float64 reference on a few
    columns first."""
    x = make((O, L, I), dt)
    y = cp.empty_like(x)
    xc = make((O * I, L), dt)
    fn = cs.log_softmax if log else cs.softmax
    t_contig = timeit(lambda: fn(xc, axis=-1))
    t_disp = timeit(lambda: fn(x, axis=1))
    vec = 16 // x.dtype.itemsize if I % (16 // x.dtype.itemsize) == 0 else 1
    cur = D.plan_cols(O, L, I, dt, dt, log, dev, vec)
    cols = sorted({0, 1, 2, I // 2, I - 3, I - 2, I - 1} & set(range(I)))
    r3 = (ref.log_softmax if log else ref.softmax)(x[:, :, cols], axis=1)

    def run(plan):
        ln = Launch(plan, 0)
        f = lambda: ln.cols(x.data.ptr, y.data.ptr, O, L, I, L * I, I, L * I, I)
        y.fill(0); f(); cp.cuda.runtime.deviceSynchronize()
        err = float(np.nanmax(np.abs(ref.to_float64(y[:, :, cols]) - r3)))
        ok = err < (2e-2 if dt != "float32" else 1e-5)
        rounds = -(-plan.extra[2] * plan.extra[1] // plan.grid[0])
        return timeit(f), rounds, ok, err
    return t_contig, t_disp, cur, vec, run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--log", action="store_true")
    a = ap.parse_args()
    dev = device_info(0)
    res = []
    for dt in a.dtypes.split(","):
        for O, L, I in SHAPES:
            t_contig, t_disp, cur, vec, run = case(O, L, I, dt, a.log, dev)
            line = []
            for nr, pf, mr in [(n, True, m) for n in D.COLS_SYNC_NR for m in (1, 2)]:
                plan = D._plan_cols_sync(O, L, I, dt, dt, a.log, dev, vec, nr, pf, mr)
                if plan is None:
                    continue
                us, rounds, ok, err = run(plan)
                line.append(f"sync nr{nr}{'p' if pf else ''}m{mr} g{plan.grid[0]} r{rounds} {us:.1f} ({us / t_contig:.2f}x)"
                            + ("" if ok else f" WRONG err={err:.2e}"))
                res.append(dict(shape=[O, L, I], dtype=dt, log=a.log, cand=f"sync{nr}{'p' if pf else ''}m{mr}", us=us,
                                contig_us=t_contig, disp_us=t_disp, grid=plan.grid[0], rounds=rounds,
                                ok=ok))
            kname = cur.kernel.split("<")[0]
            print(f"{dt:9s} O{O} L{L} I{I}: contig {t_contig:.1f} dispatch({kname}) {t_disp:.1f} "
                  f"= {t_disp / t_contig:.2f}x | " + "; ".join(line), flush=True)
            del run
            cp.get_default_memory_pool().free_all_blocks()
    if a.json:
        json.dump(res, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
