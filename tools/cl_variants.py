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
from sync_variants import _loader, cli, head_source

SHAPES = [(dt, s) for dt in ("float16", "bfloat16") for s in
          ((1, 512, 512), (1, 200, 4096), (1, 1000, 1000), (1, 2048, 1024), (1, 512, 16384), (64, 512, 256),
           (1, 256, 32768))] + [("float32", s) for s in ((1, 512, 512), (1, 200, 4096), (1, 1000, 1000))]
SWEEP = "  if constexpr (IsSame<T, f16_t>::value) {  // (as softmax_cols_sync)"
FIN = "  constexpr bool FIN = sizeof(T) == 2;"


def variants(old_dir):
    _loader._source_cache.clear()
    body = _loader.expanded_source("softmax.cu").split("\n", 1)[1]
    assert body.count(SWEEP) == 1 and body.count(FIN) == 1
    out = {"cur": body, "1sweep": body.replace(SWEEP, "  if constexpr (false) {"),
           "nofin": body.replace(FIN, "  constexpr bool FIN = false;"),
           "fin": body.replace(FIN, "  constexpr bool FIN = true;")}
    if old_dir:
        out["head"] = head_source(old_dir)
    return out


def _label(plan):
    assert plan.kernel.startswith("softmax_cols_cl"), plan.kernel
    k = plan.kernel.split("<")[1].split(",")
    return f"nr{k[5].strip()} cl{k[6].strip()}"


def main():
    cli(variants, SHAPES, _label)


if __name__ == "__main__":
    main()
