"""Is the strided-axis kernel of a small array bound by cold instruction
fetch? Per shape (reduction along L of a C-ordered (O, L, I) array), the
dispatcher's strided plan and cusoftmax.softmax on the same elements as
contiguous rows, each timed (CUDA events around the one launch, median of 30)
  cold  after an L2 flush (256 MiB memset: cold code, cold data; the
        harness of every table),
  warm  after the flush plus one launch of the same kernel on another pair
        of buffers (warm code, cold data).
--sources: files of kernels/ to time the strided plan from (variants).

    PYTHONPATH=.:tools python tools/cl_icache.py [--shapes OxLxI,...] [--dtypes ...] [--log]
        [--sources softmax.cu,...]
"""
import argparse
import dataclasses

import numpy as np
import cupy as cp

import cusoftmax as cs
from cusoftmax import _dispatch as D
from cusoftmax._launch import Launch, device_info
from tune import FLUSH
from tune_cols import make


def med(setup, fn, reps=30):
    ev = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(reps)]
    for a, b in ev:
        FLUSH.fill(1)
        setup()
        a.record()
        fn()
        b.record()
    b.synchronize()
    return float(np.median([cp.cuda.get_elapsed_time(a, b) for a, b in ev])) * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="1x1000x1000,1x2048x1024,1x512x512,1x512x16384")
    ap.add_argument("--dtypes", default="float32,bfloat16,float16")
    ap.add_argument("--log", action="store_true")
    ap.add_argument("--sources", default="softmax.cu")
    a = ap.parse_args()
    dev = device_info(0)
    fn = cs.log_softmax if a.log else cs.softmax
    print(f"# {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, "
          f"{'log_softmax' if a.log else 'softmax'}, us, cold / warm code", flush=True)
    for dt in a.dtypes.split(","):
        for s in a.shapes.split(","):
            O, L, I = (int(n) for n in s.split("x"))
            x, x2 = make((O, L, I), dt), make((O, L, I), dt)
            xc, xc2 = make((O * I, L), dt), make((O * I, L), dt)
            y, y2 = cp.empty_like(x), cp.empty_like(x)
            vec = 16 // x.dtype.itemsize if I % (16 // x.dtype.itemsize) == 0 else 1
            plan = D.plan_cols(O, L, I, dt, dt, a.log, dev, vec)
            res = [f"contig {med(lambda: None, lambda: fn(xc, axis=-1)):5.1f} / "
                   f"{med(lambda: fn(xc2, axis=-1), lambda: fn(xc, axis=-1)):5.1f}"]
            for src in a.sources.split(","):
                ln = Launch(dataclasses.replace(plan, source=src), 0)
                go = lambda xx, yy: ln.cols(xx.data.ptr, yy.data.ptr, O, L, I, L * I, I, L * I, I)
                go(x, y)
                res.append(f"{src.replace('.cu', '')} {med(lambda: None, lambda: go(x, y)):5.1f} / "
                           f"{med(lambda: go(x2, y2), lambda: go(x, y)):5.1f}")
            short = plan.kernel.split("<")[0].replace("softmax_cols_", "")
            print(f"{dt:9s} {(O, L, I)} {short} nr{plan.extra[3] if short == 'cl' else ''}: " + " | ".join(res),
                  flush=True)
            del x, x2, xc, xc2, y, y2
            cp.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    main()
