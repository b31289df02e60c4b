"""float16 against bfloat16 in softmax_cols_sync at NR 4 / 8 / 12 / 16 (an
experiment: is float16's strided softmax slow because of its NR, or is the
float16 kernel itself slow?). For each (O, L, I) (reduction along L of a
C-ordered array): contiguous time, the dispatcher's, and the sync kernel
forced to each NR (each checked against the float64 reference on a few
columns). CUDA events, L2 flushed, median of 30 (tools/tune.py timeit).
Usage (repo root): PYTHONPATH=$PWD:$PWD/tools python3 tools/f16_sync_try.py [--log]
"""
import argparse
import cupy as cp
from cusoftmax import _dispatch as D
from cusoftmax._launch import device_info
from tune_cols_sync import case

SHAPES = [(1, 2048, 4096), (1, 4096, 2048), (1, 1024, 8192), (8, 4096, 256), (1, 2048, 1024),
          (1, 1000, 1000), (1, 4096, 8192)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", action="store_true")
    ap.add_argument("--dtypes", default="float16,bfloat16")
    ap.add_argument("--nrs", default="4,8,12,16")
    a = ap.parse_args()
    D.COLS_SYNC_MINB.update({8: 2, 12: 2})
    dev = device_info(0)
    print(f"# {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()} log={a.log}", flush=True)
    for dt in a.dtypes.split(","):
        for O, L, I in SHAPES:
            t_contig, t_disp, cur, vec, run = case(O, L, I, dt, a.log, dev)
            line = []
            for nr in [int(n) for n in a.nrs.split(",")]:
                plan = D._plan_cols_sync(O, L, I, dt, dt, a.log, dev, vec, nr)
                if plan is None:
                    line.append(f"nr{nr} -")
                    continue
                us, rounds, ok, err = run(plan)
                line.append(f"nr{nr} g{plan.grid[0]} r{rounds} {us:.1f} ({us / t_contig:.2f}x)"
                            + ("" if ok else f" WRONG err={err:.2e}"))
            kname = cur.kernel.split("<")[0]
            print(f"{dt:9s} ({O}, {L}, {I}): contig {t_contig:.1f} | dispatch {kname} {t_disp:.1f} "
                  f"({t_disp / t_contig:.2f}x) | " + " | ".join(line), flush=True)
            del run
            cp.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    main()
