"""A/B of softmax_cols_sync source forms (experiment): the working tree's
kernel against forms with one choice changed, same process, same plans.
  cur      the working tree: the thread's (max, sum) over its held packs in
           two sweeps for float16, one (md_accumulate: tree max, then sum)
           for the others; the tile's column totals once a column into
           shared memory (fin); tx / ly by shifts
  2sweep   two sweeps for every type
  1sweep   md_accumulate for every type (float16 spills at NR 16)
  tot      each thread merging the warps' totals of its own columns (no fin)
  head     kernels/ of the tree given by --old (e.g. a `git archive` copy of
           the previous commit)
Each launch is checked against the float64 reference on a few columns; CUDA
events, L2 flushed, median of 30 (tools/tune.py timeit).
    PYTHONPATH=$PWD:$PWD/tools python3 tools/sync_variants.py [--old DIR] [--log]
"""
import argparse, os, re
import numpy as np, cupy as cp
import cusoftmax as cs
from cusoftmax import _dispatch as D, _loader, reference as ref
from cusoftmax._launch import Launch, device_info
from tune import timeit
from tune_cols import make

SHAPES = [("float32", (1, 2048, 1024)), ("float32", (1, 2048, 4096)), ("float32", (8, 4096, 256)),
          ("float32", (1, 8192, 1024)), ("float32", (1, 4096, 8192)), ("bfloat16", (1, 4096, 2048)),
          ("bfloat16", (8, 4096, 256)), ("bfloat16", (1, 16384, 512)), ("float16", (1, 2048, 4096)),
          ("float16", (1, 16384, 512))]

SWEEP = "    if constexpr (IsSame<T, f16_t>::value) {"
TOT_NEW = re.compile(r"    // the tile's column totals, once a column.*?(?=#pragma unroll\n      for \(int u = 0; u < NR; \+\+u\) \{)", re.S)
TOT_OLD = """    if (nv > 0) {
      const i64 yo = yoff(q);
      C m[VEC], sc[VEC];
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        MD<C> tot = md_identity<C>();
        for (int w = 0; w < WARPS; ++w) tot = md_merge(tot, red[w * COLS_SPLIT_W_MAX + tx * VEC + e]);
        m[e] = tot.m;
        sc[e] = row_scale<C, LOG>(tot);
      }
"""
FIN_USE = """finish_value<C, LOG>(to_compute<C>(v[u].v[e]), fin[tx * VEC + e].m,
                                                          fin[tx * VEC + e].d)"""


def variants(old_dir):
    _loader._source_cache.clear()
    cur = _loader.expanded_source("softmax.cu")
    body = cur.split("\n", 1)[1]
    out = {"cur": body}
    assert body.count(SWEEP) == 1
    out["2sweep"] = body.replace(SWEEP, "    if constexpr (true) {")
    out["1sweep"] = body.replace(SWEEP, "    if constexpr (false) {")
    t = TOT_NEW.sub(lambda m: TOT_OLD, body, count=1)
    assert t != body and FIN_USE in t
    out["tot"] = t.replace(FIN_USE, "finish_value<C, LOG>(to_compute<C>(v[u].v[e]), m[e], sc[e])")
    if old_dir:
        out["head"] = head_source(old_dir)
    return out


def head_source(old_dir):
    """softmax.cu (headers inlined) of the kernels/ folder under ``old_dir``."""
    _loader._source_cache.clear()
    kd = _loader.kernel_dir
    _loader.kernel_dir = lambda: os.path.join(old_dir, "kernels")
    try:
        return _loader.expanded_source("softmax.cu").split("\n", 1)[1]
    finally:
        _loader.kernel_dir = kd
        _loader._source_cache.clear()


def use(body, tag):
    _loader._source_cache.clear()
    _loader._source_cache["softmax.cu"] = f"// cusoftmax softmax.cu sha256:{tag}\n// variant {tag}\n{body}"
    _loader._kernels.clear()


def compare(vs, shapes, log, label):
    """Time every source form of ``vs`` on the dispatcher's plan for each
    (dtype, (O, L, I)) of ``shapes``; ``label(plan)``: the plan's tag for the
    line (asserting it is the kernel under test)."""
    dev = device_info(0)
    print(f"# {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()} log={log}; us (x contiguous)", flush=True)
    fn = cs.log_softmax if log else cs.softmax
    rf = ref.log_softmax if log else ref.softmax
    for dt, (O, L, I) in shapes:
        x = make((O, L, I), dt)
        y = cp.empty_like(x)
        xc = make((O * I, L), dt)
        t_c = timeit(lambda: fn(xc, axis=-1))
        plan = D.plan_cols(O, L, I, dt, dt, log, dev, 16 // x.dtype.itemsize)
        tag0 = label(plan)
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
        print(f"{dt:9s} ({O}, {L}, {I}) {tag0}: contig {t_c:6.1f} | " + " | ".join(line), flush=True)
        del x, y, xc
        cp.get_default_memory_pool().free_all_blocks()


def _label(plan):
    assert plan.sync, plan.kernel
    return plan.kernel.split(",")[5].strip()


def cli(make_variants, shapes, label):
    """The A/B tools' command line: --old DIR (the old side's kernels), --log."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", default=None)
    ap.add_argument("--log", action="store_true")
    a = ap.parse_args()
    compare(make_variants(a.old), shapes, a.log, label)


def main():
    cli(variants, SHAPES, _label)


if __name__ == "__main__":
    main()
