"""Sweep the strided-axis (cols) kernels against the same data contiguous.

For each (O, L, I) (reduction along L of a C-ordered (O, L, I) array) and
dtype: time the dispatcher's choice through ``cusoftmax.softmax``, the same
elements as contiguous rows ``(O * I, L)``, and hand-built alternatives
(register kernel, staged kernel at several tile widths and block sizes), CUDA
events, L2 flushed before each repetition. Prints one line per shape; used to
set the COLS_* thresholds in cusoftmax/_dispatch.py.
"""
import argparse, itertools, json, re
import numpy as np, cupy as cp
import cusoftmax as cs
from cusoftmax import _dispatch as D, reference as ref
from cusoftmax._launch import Launch, device_info
from tune import timeit  # same timing rules (tools/ is on sys.path when run as a script)


def make(shape, dt):
    x = cp.random.standard_normal(shape, dtype=cp.float32)
    if dt == "bfloat16":
        import ml_dtypes
        return (x.view(cp.uint32) >> 16).astype(cp.uint16).view(ml_dtypes.bfloat16)
    return x.astype(dt)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--only", default=None, help="regex: time only candidates whose name matches")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    a = ap.parse_args()
    only = re.compile(a.only) if a.only else None
    dev = device_info(0)
    shapes = [(1, 2048, 4096), (1, 4096, 2048), (1, 1024, 8192), (1, 512, 16384), (1, 8192, 1024),
              (1, 16384, 512), (64, 512, 256), (8, 4096, 256), (1, 65536, 64), (1, 32768, 256),
              (1, 256, 32768), (1, 65536, 128), (1, 2048, 1024), (4, 262144, 64), (1, 4096, 8192),
              (1, 1000, 1000)]
    res = []
    for dt in a.dtypes.split(","):
        isz = 4 if dt == "float32" else 2
        T = D.CTYPE[dt]
        for O, L, I in shapes:
            x = make((O, L, I), dt)
            y = cp.empty_like(x)
            nbytes = 2 * x.nbytes
            xc = make((O * I, L), dt)
            t_contig = timeit(lambda: cs.softmax(xc, axis=-1))
            t_disp = timeit(lambda: cs.softmax(x, axis=1))
            ref_y = ref.softmax(x[:, :, :3], axis=1)
            cands = []
            vmax = 16 // isz
            th = 512
            for W, st, c in itertools.product((8, 16, 32, 64), (0, 1, 2), (1, 2, 4, 8)):
                if W * isz < 16 or W * isz > 128 or W > 64:
                    continue
                v = min(vmax, W)
                if st and v * isz != 16:
                    continue
                tx = W // v
                smem = -(-L // c) * W * isz * max(st, 1)
                # the smallest cluster that holds the tile (and no cluster beyond it)
                if smem > dev.max_smem or (c > 1 and -(-L // (c // 2)) * W * isz * max(st, 1) <= dev.max_smem):
                    continue
                per_sm = max(1, min((dev.max_smem + 1024) // (smem + 1024), 2048 // th))
                tiles = O * -(-I // W)
                grid = min(tiles, dev.sm_count * per_sm) if c == 1 else min(tiles, dev.sm_count) * c
                k = f"softmax_cols_staged<{T}, {T}, false, {v}, {th}, {st}, {c}>"
                cands.append((f"staged W{W} s{st} c{c}", D.LaunchPlan("cols", "softmax.cu", k, (grid,), (th,), 1,
                                                                    extra=(tx,), smem=smem, cluster=c)))
            for th in (256, 512, 1024):
                for tx in (8, 16, 32):
                    if tx * isz < 32:
                        continue
                    grid = min(O * -(-I // tx), dev.sm_count * 32)
                    k = f"softmax_cols<{T}, {T}, false, 16, {th}>"
                    nm = "regs" if L <= th // tx * 16 else "2pass"
                    cands.append((f"{nm} t{th} tx{tx}", D.LaunchPlan("cols", "softmax.cu", k, (grid,), (th,), 1,
                                                                     extra=(tx,))))
            for seg, bps, unr in itertools.product((128, 256), (4, 8), (4, 8)):
                vec = 16 // isz if I % (16 // isz) == 0 else 1
                cands.append((f"split seg{seg} b{bps} u{unr}",
                              D._plan_cols_split(O, L, I, dt, dt, False, dev, vec, seg, bps, unr)))
            if only is not None:
                cands = [(n, p) for n, p in cands if only.search(n)]
            line = []
            for name, plan in cands:
                try:
                    ln = Launch(plan, 0)
                    f = lambda: ln.cols(x.data.ptr, y.data.ptr, O, L, I, L * I, I, L * I, I)
                    y.fill(0); f(); cp.cuda.runtime.deviceSynchronize()
                except Exception as e:
                    print("fail", name, str(e)[:200], flush=True); continue
                err = float(np.nanmax(np.abs(ref.to_float64(y[:, :, :3]) - ref_y)))
                if not err < (2e-2 if dt != "float32" else 1e-5):
                    print(f"WRONG {name} err={err}", flush=True)
                us = timeit(f)
                if plan.pre_kernel:  # the first of the two launches alone
                    ws = cp.zeros(plan.ws_elems, plan.ws_dtype)
                    tx, lps = np.int32(plan.extra[0]), plan.extra[1]
                    cnt = ws[-(-4 * plan.extra[2] // ws.itemsize):]  # the per-tile counters

                    def pre():  # as the launcher: counters zeroed, then the partial kernel
                        cnt.fill(0)
                        ln.pre_fn(plan.pre_grid, plan.block, (x, ws, O, L, I, L * I, I, lps, tx))
                    pre_us = timeit(pre)
                    name = f"{name} (pre {pre_us:.1f})"
                line.append((us, name))
                res.append(dict(shape=[O, L, I], dtype=dt, cand=name, us=us, contig_us=t_contig))
            line.sort()
            res.append(dict(shape=[O, L, I], dtype=dt, cand="dispatch", us=t_disp, contig_us=t_contig))
            print(f"{dt:9s} O{O} L{L} I{I}: contig {t_contig:.1f}us ({nbytes / t_contig / 1e6:.2f} TB/s) "
                  f"dispatch {t_disp:.1f}us = {t_disp / t_contig:.2f}x | best: " +
                  "; ".join(f"{n} {u:.1f} ({u / t_contig:.2f}x)" for u, n in line[:4]), flush=True)
            del x, y, xc
            cp.get_default_memory_pool().free_all_blocks()
    if a.json:
        json.dump(res, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
