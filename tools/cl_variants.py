"""A/B of softmax_cols_cl source forms (experiment), as tools/sync_variants.py:
  cur     the working tree: float16's (max, sum) over its held packs in two
          sweeps (others: md_accumulate four rows at a time); 16-bit: the
          cluster's column totals once a column into shared memory, float32:
          every thread merging the cluster's partials of its own columns
  1sweep  md_accumulate four rows at a time for float16 too
  nofin   every thread merging its own columns' partials, every type
  fin     the totals once a column into shared memory, every type
  head    kernels/ of the tree given by --old (a `git archive` copy)
Each launch checked against the float64 reference on a few columns; CUDA
events, L2 flushed, median of 30 (tools/tune.py timeit).
    PYTHONPATH=$PWD:$PWD/tools python3 tools/cl_variants.py [--old DIR] [--log]
"""
import argparse
import numpy as np, cupy as cp
import cusoftmax as cs
from cusoftmax import _dispatch as D, reference as ref
from cusoftmax._launch import Launch, device_info
from tune import timeit
from tune_cols import make
from sync_variants import use, _loader, os

SHAPES = [(dt, s) for dt in ("float16", "bfloat16") for s in
          ((1, 512, 512), (1, 200, 4096), (1, 1000, 1000), (1, 2048, 1024), (1, 512, 16384), (64, 512, 256),
           (1, 256, 32768))] + [("float32", s) for s in ((1, 512, 512), (1, 200, 4096), (1, 1000, 1000))]
SWEEP = "  if constexpr (IsSame<T, f16_t>::value) {  // two sweeps (as softmax_cols_sync)"
FIN = "  constexpr bool FIN = sizeof(T) == 2;"


def variants(old_dir):
    _loader._source_cache.clear()
    body = _loader.expanded_source("softmax.cu").split("\n", 1)[1]
    assert body.count(SWEEP) == 1 and body.count(FIN) == 1
    out = {"cur": body, "1sweep": body.replace(SWEEP, "  if constexpr (false) {"),
           "nofin": body.replace(FIN, "  constexpr bool FIN = false;"),
           "fin": body.replace(FIN, "  constexpr bool FIN = true;")}
    if old_dir:
        _loader._source_cache.clear()
        kd = _loader.kernel_dir
        _loader.kernel_dir = lambda: os.path.join(old_dir, "kernels")
        out["head"] = _loader.expanded_source("softmax.cu").split("\n", 1)[1]
        _loader.kernel_dir = kd
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", default=None)
    ap.add_argument("--log", action="store_true")
    a = ap.parse_args()
    dev = device_info(0)
    vs = variants(a.old)
    print(f"# {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()} log={a.log}; us (x contiguous)", flush=True)
    fn = cs.log_softmax if a.log else cs.softmax
    rf = ref.log_softmax if a.log else ref.softmax
    for dt, (O, L, I) in SHAPES:
        x = make((O, L, I), dt)
        y = cp.empty_like(x)
        xc = make((O * I, L), dt)
        t_c = timeit(lambda: fn(xc, axis=-1))
        plan = D.plan_cols(O, L, I, dt, dt, a.log, dev, 16 // x.dtype.itemsize)
        assert plan.kernel.startswith("softmax_cols_cl"), plan.kernel
        cols = sorted({0, 1, I // 2, I - 2, I - 1})
        r = rf(x[:, :, cols], axis=1)
        line = []
        for tag, body in vs.items():
            use(body, f"{abs(hash(body)) % 10**12:012d}")
            ln = Launch(plan, 0)
            f = lambda: ln.cols(x.data.ptr, y.data.ptr, O, L, I, L * I, I, L * I, I)
            y.fill(0); f(); cp.cuda.runtime.deviceSynchronize()
            err = float(np.nanmax(np.abs(ref.to_float64(y[:, :, cols]) - r) / np.maximum(1, np.abs(r))))
            bad = err > (1e-5 if dt == "float32" else 1e-2)
            us = timeit(f)
            line.append(f"{tag} {us:6.1f} ({us / t_c:.2f}x)" + (f" WRONG {err:.1e}" if bad else ""))
        k = plan.kernel.split("<")[1].split(",")
        print(f"{dt:9s} ({O}, {L}, {I}) nr{k[5].strip()} cl{k[6].strip()}: contig {t_c:6.1f} | " + " | ".join(line),
              flush=True)
        del x, y, xc
        cp.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    main()
