"""One launch of softmax_cols_cl (and of the contiguous kernel on the same
elements) per source and dtype, between cudaProfilerStart / Stop, for ncu:

    ncu --profile-from-start off --section ... python3 tools/ncu_cl.py \
        [--shape 1x1000x1000] [--dtypes float32,...] [--sources softmax.cu,...] [--no-contig]

Each launch is warmed up (compiled, caches of code) before the profiled one.
"""
import argparse
import dataclasses

import cupy as cp

import cusoftmax as cs
from cusoftmax import _dispatch as D
from cusoftmax._launch import Launch, device_info
from tune_cols import make


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="1x1000x1000")
    ap.add_argument("--dtypes", default="float32")
    ap.add_argument("--sources", default="softmax.cu")
    ap.add_argument("--log", action="store_true")
    ap.add_argument("--no-contig", action="store_true")
    a = ap.parse_args()
    O, L, I = (int(n) for n in a.shape.split("x"))
    dev = device_info(0)
    fn = cs.log_softmax if a.log else cs.softmax
    for dt in a.dtypes.split(","):
        x = make((O, L, I), dt)
        xc = make((O * I, L), dt)
        y = cp.empty_like(x)
        vec = 16 // x.dtype.itemsize if I % (16 // x.dtype.itemsize) == 0 else 1
        plan = D.plan_cols(O, L, I, dt, dt, a.log, dev, vec)
        calls = [] if a.no_contig else [("contig", lambda: fn(xc, axis=-1))]
        for src in a.sources.split(","):
            ln = Launch(dataclasses.replace(plan, source=src), 0)
            calls.append((src, lambda ln=ln: ln.cols(x.data.ptr, y.data.ptr, O, L, I, L * I, I, L * I, I)))
        for name, f in calls:
            for _ in range(3):
                f()
            cp.cuda.runtime.deviceSynchronize()
            print(f"profiled: {dt} {(O, L, I)} {name} {plan.kernel if name != 'contig' else ''}", flush=True)
            cp.cuda.runtime.profilerStart()
            f()
            cp.cuda.runtime.deviceSynchronize()
            cp.cuda.runtime.profilerStop()


if __name__ == "__main__":
    main()
