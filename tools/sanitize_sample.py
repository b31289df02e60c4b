#!/usr/bin/env python3
"""A small sample of every regime of every available operation, run once and
checked against the reference: the workload ``tools/sanitize.sh`` runs under
compute-sanitizer (memcheck, racecheck, synccheck).

Covers, per operation: one shape per regime the operation's planner picks on
this GPU (from ``_ops.regime_cases``), the strided-axis (cols) and copy
layouts, 16-bit rows misaligned by an odd element offset, the paper's three
streaming algorithms, and (planning as if on a 2-SM GPU) long rows split
across blocks and streamed with grid-stride loops. Exit status 1 if any
result is wrong.
"""
import os
import re
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))

import numpy as np  # noqa: E402


def main():
    import cupy
    from _check import fake_device, real_device_info
    from _ops import ALL_OPS, regime_cases

    dev = real_device_info()
    ops = [o for o in ALL_OPS if o.available()]
    missing = [o.name for o in ALL_OPS if not o.available()]
    rng = np.random.default_rng(0)
    n = bad = 0
    t0 = time.time()

    only = os.environ.get("SANITIZE_ONLY")  # a regex on the sample labels (default: all)

    def one(op, shape, axis=-1, dtype="float32", view=None, label="", **kw):
        nonlocal n, bad
        if only and not re.search(only, label):
            return
        h = op.make_inputs(rng, shape, dtype, axis)
        g = {k: cupy.asarray(v) for k, v in h.items()}
        if view is not None:
            g = {k: view(v) for k, v in g.items()}
            h = {k: view(v) for k, v in h.items()}
        try:
            res = op.call(g, axis, **kw)
            cupy.cuda.get_current_stream().synchronize()
            op.check(res, h, axis, naive=kw.get("algorithm") == "naive")  # naive: its own error bound
            status = "ok"
        except Exception as e:  # noqa: BLE001
            bad += 1
            status = f"FAILED {type(e).__name__}: {str(e)[:300]}"
        n += 1
        print(f"{op.name:24s} {label:14s} {str(shape):18s} {dtype:9s} {status}", flush=True)

    for op in ops:
        for regime, shape in sorted(regime_cases(op, dev).items()):
            if shape[0] * shape[1] > (1 << 22):
                continue  # large: the same kernels run below on a 2-SM plan
            one(op, shape, label=regime)
        if op.family == "backward":  # the staged kernel: many rows (regime_cases skips them as large)
            R = op.plan(2 * dev.sm_count, 8200, "float32", dev)
            one(op, (2 * dev.sm_count, 8200), label=R.regime if R is not None else "rows")
        if op.family in ("forward", "backward"):
            one(op, (16, 50, 33), axis=1, label="cols")
        if op.family == "forward":
            # packs under 16 bytes: on sm_90 the narrow-pack plans (softmax_cols_cl with scalars
            # in clusters of 8 / 8 / 2, with 8-byte float16 packs; softmax_cols_sync with scalars
            # at NR 32), before sm_90 the staged kernel and the split stream
            one(op, (3, 600, 66), axis=1, label="cols-narrow")
            one(op, (2, 2000, 42), axis=1, label="cols-narrow")
            one(op, (40, 400, 130), axis=1, label="cols-narrow")
            one(op, (1, 700, 1500), axis=1, dtype="float16", label="cols-narrow")
            one(op, (1, 1500, 1001), axis=1, dtype="bfloat16", label="cols-narrow")  # clusters of 6
            one(op, (1, 2000, 1001), axis=1, dtype="bfloat16", label="cols-narrow")  # 3 blocks an SM
            one(op, (1, 2000, 1001), axis=1, dtype="float16", label="cols-narrow")  # 3 blocks an SM, two sweeps
            one(op, (1, 1500, 1001), axis=1, dtype="float16", label="cols-narrow")  # clusters of 6, 3 blocks an SM
            one(op, (1, 700, 2001), axis=1, label="cols-narrow")  # clusters of 3
            one(op, (2, 20000, 41), axis=1, label="cols-narrow")
            one(op, (1, 30000, 63), axis=1, dtype="bfloat16", label="cols-narrow")
            # staged cols (float64): a cluster of 2 and of 8 blocks, scalars in a cluster of 4
            one(op, (3, 600, 66), axis=1, dtype="float64", label="cols-staged")
            one(op, (2, 2000, 42), axis=1, dtype="float64", label="cols-staged")
            one(op, (3, 700, 33), axis=1, dtype="float64", label="cols-staged")
            # one-launch cols on sm_90 (16-byte packs, small arrays): a cluster a tile of 4, 8 and 4 blocks
            one(op, (3, 600, 64), axis=1, label="cols-cl")
            one(op, (2, 2000, 40), axis=1, label="cols-cl")
            one(op, (1, 2048, 1024), axis=1, dtype="bfloat16", label="cols-cl")
            # small arrays on few blocks (sm_90): clusters of 8 on 32- / 64-byte tiles, 8-byte 16-bit
            # packs on 32-byte tiles in clusters of 6, the sync kernel at NR 4 on 64-byte tiles
            one(op, (1, 4000, 64), axis=1, dtype="bfloat16", label="cols-small")
            one(op, (4, 2000, 64), axis=1, dtype="float16", label="cols-small")
            one(op, (1, 6000, 32), axis=1, label="cols-small")
            one(op, (1, 3000, 100), axis=1, dtype="bfloat16", label="cols-small")
            one(op, (1, 16000, 64), axis=1, dtype="float16", label="cols-small")
            # the fold in place of a sync plan in two rounds (under 6 MiB; 4-byte packs)
            one(op, (1, 3000, 1001), axis=1, dtype="bfloat16", label="cols-small")
            one(op, (1, 2600, 1002), axis=1, dtype="float16", label="cols-small")
            # one-launch cols (16-byte packs): NR 16 in one round and over rounds (sm_90:
            # larger arrays; sm_80: all of the above too)
            one(op, (40, 400, 128), axis=1, label="cols-sync")
            one(op, (1, 2048, 1024), axis=1, label="cols-sync")
            one(op, (8, 4096, 256), axis=1, dtype="bfloat16", label="cols-sync")
            one(op, (1, 600, 16384), axis=1, label="cols-sync")
            # 59 and 40 blocks a tile: the tile's partials merged by every block (cols_merge_partials)
            one(op, (1, 30000, 64), axis=1, dtype="bfloat16", label="cols-sync")
            one(op, (2, 20000, 40), axis=1, label="cols-sync")
            # balanced rounds (COLS_SYNC_BALANCE: 47 / 24 tiles, more splits than NR 16 needs,
            # float32's 256-byte tiles)
            one(op, (1, 3000, 1500), axis=1, label="cols-sync")
            one(op, (1, 6000, 1000), axis=1, dtype="bfloat16", label="cols-sync")
            # the split stream (float64 scalar packs): the last block's merge over 157 / 235
            # splits, a partial last tile, the per-tile counters left at zero
            one(op, (2, 20000, 41), axis=1, dtype="float64", label="cols-split")
            one(op, (1, 30000, 63), axis=1, dtype="float64", label="cols-split")
            one(op, (40, 400, 130), axis=1, dtype="float64", label="cols-split")
            # the folded sync kernel (dense slabs of 6 MiB or more, unit-stride axes not a multiple of
            # the pack): fold 4 at NR 16, two slabs, fold 8 in 16-bit, 64-byte tiles
            one(op, (1, 2000, 1001), axis=1, label="cols-fold")
            one(op, (2, 2000, 1001), axis=1, label="cols-fold")
            one(op, (1, 4000, 1001), axis=1, dtype="bfloat16", label="cols-fold")
            one(op, (1, 16384, 255), axis=1, dtype="float16", label="cols-fold")
            # skewed packs (sm_90: 16-bit rows off the 16-byte grid, rows of 6000 bytes or more, 8 MiB or more)
            one(op, (1, 1000, 5001), axis=1, dtype="bfloat16", label="cols-skew")
            one(op, (1, 2000, 3001), axis=1, dtype="float16", label="cols-skew")
            # the folded split stream (sm_90: dense, too long for one slab of the folded sync kernel
            # and split too often for the skewed sync plan): fold 4 (float32, I odd; bfloat16, I = 2 mod 8)
            one(op, (1, 16400, 1001), axis=1, label="cols-sfold")
            one(op, (1, 16384, 1002), axis=1, dtype="bfloat16", label="cols-sfold")
            # the sync kernel with skewed 16-byte packs (sm_90, float32 / bfloat16 rows off the grid):
            # one slab (one round, several), two slabs off the grid differently
            one(op, (1, 8000, 1001), axis=1, label="cols-sksync")
            one(op, (1, 2000, 3001), axis=1, dtype="bfloat16", label="cols-sksync")
            one(op, (2, 2100, 2001), axis=1, label="cols-sksync")
            one(op, (6, 7, 40), axis=(0, 2), label="copy")
        for dt in ("float16", "bfloat16"):
            one(op, (9, 3001), dtype=dt, label="misaligned",
                view=lambda a: a.reshape(-1)[1:1 + 8 * 3001].reshape(8, 3001))
        if op.family == "forward":
            for alg in ("naive", "safe", "online"):
                one(op, (5, 5000), label=alg, algorithm=alg)
        with fake_device(2, dev.cc):
            one(op, (1, 300001), label="split(2 SMs)")
            one(op, (3, 300001), label="stream(2 SMs)")
            one(op, (300, 500), label="loop(2 SMs)")
    print(f"sanitize sample: {n} runs, {bad} wrong, {time.time() - t0:.1f} s"
          + (f"; not available: {', '.join(missing)}" if missing else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
