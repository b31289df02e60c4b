"""The split stream of strided axes (softmax_cols_split_partial + _finish)
launched directly, for the narrow-inner layouts it serves ((65536, 64),
(32768, 256), ...): where its time goes and what moves it.

    PYTHONPATH=.:tools python tools/narrow_try.py [ab] [parts] [sync] [rule] [--dtypes ...]

ab:    kernels/_old_softmax.cu (the previous commit's source, copied by hand;
       its partial kernel takes no counter pointer and needs its counters
       zeroed by a memset before each launch, as its launcher did) against
       the current source, the dispatcher's split plan, alternating, 3 rounds
       of a median of 30; outputs compared bit for bit and with the float64
       reference on a few columns.
parts: the current source's partial kernel alone, without its last block's
       merge (-DCOLS_SPLIT_STOP=1), the finish kernel alone, and the whole at
       other split counts and partial unrolls.
sync:  softmax_cols_sync (the dispatcher's plan where it takes it, else
       _plan_cols_sync forced) from kernels/_old_softmax.cu and the current
       source, alternating as in ab; the forced plans show what the sync
       kernel would give past COLS_SYNC_MAX_SPLITS.
rule:  the dispatcher's plan against softmax_cols_sync with no limit on
       blocks a tile (NR chosen as the dispatcher does) and the split stream,
       all through Launch, on shapes of 32-264 blocks a tile in one or more
       rounds (RULE_SHAPES): where COLS_SYNC_MAX_SPLITS should sit.
Times: CUDA events, L2 flushed before each repetition (tools/tune.py
timeit), us; "contig": cusoftmax.softmax on the same elements as
contiguous rows (O * I, L).
"""
import argparse
import dataclasses

import numpy as np
import cupy as cp

import cusoftmax as cs
from cusoftmax import _dispatch as D, reference as ref
from cusoftmax._launch import Launch, device_info
from cusoftmax._loader import expanded_source, COMPILE_OPTIONS
from tune import timeit
from tune_cols import make

SHAPES = [(1, 65536, 64), (1, 32768, 256), (1, 65536, 128), (1, 256, 32768), (4, 262144, 64)]
RULE_SHAPES = [(1, 65536, 64), (1, 32768, 256), (1, 65536, 128), (1, 131072, 64), (1, 32768, 64),
               (2, 65536, 64), (1, 65536, 256), (1, 131072, 128), (4, 65536, 128), (1, 65536, 512),
               (1, 32768, 1024), (16, 32768, 64)]
SYNC_SHAPES = [(1, 2048, 1024), (1, 2048, 4096), (1, 8192, 1024), (1, 16384, 512), (1, 16384, 4096),
               (1, 65536, 64), (1, 32768, 256), (1, 65536, 128)]
_mods = {}


def fn_of(kernel, src="softmax.cu", opts=(), code=None):
    """``kernel`` compiled from kernels/``src`` (or from the source text
    ``code``, src None) with extra NVRTC ``opts``, once."""
    key = (kernel, src, opts)
    if key not in _mods:
        _mods[key] = cp.RawModule(code=code if code is not None else expanded_source(src),
                                  options=COMPILE_OPTIONS + opts, name_expressions=[kernel]).get_function(kernel)
    return _mods[key]


def resplit(plan, L, splits):
    """The plan with the axis cut into (about) ``splits`` pieces."""
    tx, _, tiles = plan.extra
    w = plan.ws_elems // (2 * tiles * (plan.grid[1] + 1))
    lps = -(-L // splits)
    s = -(-L // lps)
    return dataclasses.replace(plan, grid=(tiles, s), pre_grid=(tiles, s), extra=(tx, lps, tiles),
                               ws_elems=2 * tiles * (s + 1) * w)


def with_unroll(plan, u):
    a = plan.pre_kernel[:-1].split(", ")
    a[-1] = str(u)
    return dataclasses.replace(plan, pre_kernel=", ".join(a) + ">")


class Run:
    """Launch closures of one split plan on x -> y (source src; old: the
    previous launcher's counters-in-workspace convention)."""

    def __init__(self, plan, x, y, O, L, I, src="softmax.cu", old=False, opts=()):
        tx, lps, tiles = plan.extra
        self.pre = fn_of(plan.pre_kernel, src, opts)
        self.fin = fn_of(plan.kernel, src, opts)
        C = cp.float64 if plan.ws_dtype == "float64" else cp.float32
        n = plan.ws_elems + (-(-4 * tiles // np.dtype(C).itemsize) if old else 0)
        self.ws = cp.empty(n, C)
        self.cnt = cp.zeros(max(64, tiles), cp.uint32)
        self.tail = n * np.dtype(C).itemsize - plan.ws_elems * np.dtype(C).itemsize
        self.old, self.plan = old, plan
        tx = np.int32(tx)
        if old:
            self.pargs = (x.data.ptr, self.ws, O, L, I, L * I, I, lps, tx)
        else:
            self.pargs = (x.data.ptr, self.ws, self.cnt, O, L, I, L * I, I, lps, tx)
        self.fargs = (x.data.ptr, y.data.ptr, self.ws, O, L, I, L * I, I, L * I, I, lps, tx)

    def partial(self):
        if self.old:
            cp.cuda.runtime.memsetAsync(self.ws.data.ptr + self.ws.nbytes - self.tail, 0, self.tail,
                                        cp.cuda.get_current_stream().ptr)
        self.pre(self.plan.pre_grid, self.plan.block, self.pargs)

    def finish(self):
        self.fin(self.plan.grid, self.plan.block, self.fargs)

    def whole(self):
        self.partial()
        self.finish()


def check(y, x, cols, log):
    r = (ref.log_softmax if log else ref.softmax)(x[:, :, cols], axis=1)
    return float(np.nanmax(np.abs(ref.to_float64(y[:, :, cols]) - r)))


def setup(dt, O, L, I, log):
    """One case: (x, y, fn, t_c, vec, cols, tol): input and output of shape
    (O, L, I), the public function, its time on the same elements as
    contiguous rows, the widest vector I allows, the columns checked against
    the reference and the tolerance."""
    x = make((O, L, I), dt)
    y = cp.empty_like(x)
    xc = make((O * I, L), dt)
    fn = cs.log_softmax if log else cs.softmax
    t_c = timeit(lambda: fn(xc, axis=-1))
    vec = 16 // x.dtype.itemsize if I % (16 // x.dtype.itemsize) == 0 else 1
    return x, y, fn, t_c, vec, sorted({0, 1, I // 2, I - 1}), (2e-2 if dt != "float32" else 1e-5)


def sync_ab(dev, a, shapes):
    for dt in a.dtypes.split(","):
        for O, L, I in shapes:
            x, y, fn, t_c, vec, cols, tol = setup(dt, O, L, I, a.log)
            plan = D.plan_cols(O, L, I, dt, dt, a.log, dev, vec)
            forced = not plan.kernel.startswith("softmax_cols_sync")
            if forced:
                plan = D._plan_cols_sync(O, L, I, dt, dt, a.log, dev, vec, 16)
                if plan is None:
                    continue
            fs, ts, errs = {}, {"old": [], "new": []}, {}
            for k, pl in (("old", dataclasses.replace(plan, source="_old_softmax.cu")), ("new", plan)):
                ln = Launch(pl, 0)
                fs[k] = lambda ln=ln: ln.cols(x.data.ptr, y.data.ptr, O, L, I, L * I, I, L * I, I)
            for _ in range(3):
                for k in ("old", "new"):
                    y.fill(0)
                    fs[k]()
                    errs[k] = check(y, x, cols, a.log)
                    ts[k].append(timeit(fs[k]))
            o, n = min(ts["old"]), min(ts["new"])
            tx, splits, tiles, nr = plan.extra
            print(f"{dt:9s} {(O, L, I)} sync{' (forced)' if forced else ''} nr{nr} splits {splits} grid "
                  f"{plan.grid[0]}: contig {t_c:.1f} | old {' '.join(f'{t:6.1f}' for t in ts['old'])} | new "
                  f"{' '.join(f'{t:6.1f}' for t in ts['new'])} | {o / n:.3f}x, old {o / t_c:.2f}x new "
                  f"{n / t_c:.2f}x contig, err {errs['old']:.1e} / {errs['new']:.1e}"
                  + ("" if max(errs.values()) < tol else " WRONG"), flush=True)
            cp.get_default_memory_pool().free_all_blocks()


def rule(dev, a, shapes):
    for dt in a.dtypes.split(","):
        for O, L, I in shapes:
            x, y, fn, t_c, vec, cols, tol = setup(dt, O, L, I, a.log)
            cur = D.plan_cols(O, L, I, dt, dt, a.log, dev, vec)
            out = []
            sy = D._plan_cols_sync(O, L, I, dt, dt, a.log, dev, vec)
            cands = [("dispatch", cur), ("sync", sy)]
            if sy is not None and sy.extra[3] != 16:
                cands.append(("sync16", D._plan_cols_sync(O, L, I, dt, dt, a.log, dev, vec, 16)))
            if a.cl:
                for nr in D.COLS_CL_NR:
                    cands.append((f"cl{nr}", D._plan_cols_cl(O, L, I, dt, dt, a.log, dev, vec, nr)))
                for seg in (256, 64, 32):  # (256 bytes: float32 only, 64 columns)
                    for nr in D.COLS_CL_NR:
                        cands.append((f"cl{nr}/{seg}B", D._plan_cols_cl(O, L, I, dt, dt, a.log, dev, vec, nr, seg)))
                cands.append(("sync4", D._plan_cols_sync(O, L, I, dt, dt, a.log, dev, vec, 4)))
                for nr in D.COLS_SYNC_NR:
                    cands.append((f"sync{nr}/256B", D._plan_cols_sync(O, L, I, dt, dt, a.log, dev, vec, nr,
                                                                      segment=256)))
            cands.append(("split", D._plan_cols_split(O, L, I, dt, dt, a.log, dev, vec)))
            for name, pl in cands:
                if pl is None:
                    out.append(f"{name} -")
                    continue
                ln = Launch(pl, 0)
                f = lambda: ln.cols(x.data.ptr, y.data.ptr, O, L, I, L * I, I, L * I, I)
                y.fill(0)
                f()
                err = check(y, x, cols, a.log)
                t = timeit(f)
                if pl.kernel.startswith("softmax_cols_sync"):
                    tx, splits, tiles, nr = pl.extra
                    desc = f"nr{nr} s{splits} r{-(-tiles * splits // pl.grid[0])}"
                elif pl.pre_kernel:
                    desc = f"s{pl.grid[1]}"
                elif pl.kernel.startswith("softmax_cols_cl"):
                    desc = f"nr{pl.extra[3]} c{pl.extra[1]}"
                else:
                    desc = pl.kernel.split("<")[0]
                out.append(f"{name}({desc}) {t:.1f} {t / t_c:.2f}x" + ("" if err < tol else " WRONG"))
            print(f"{dt:9s} {(O, L, I)} contig {t_c:.1f}: " + "; ".join(out), flush=True)
            cp.get_default_memory_pool().free_all_blocks()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", nargs="*", default=["ab", "parts"])
    ap.add_argument("--dtypes", default="bfloat16,float32,float16")
    ap.add_argument("--shapes", default=None, help="OxLxI,...")
    ap.add_argument("--log", action="store_true")
    ap.add_argument("--cl", action="store_true", help="rule: also softmax_cols_cl at every NR (128-, 256-, 64- "
                                                        "and 32-byte tiles), sync at NR 4 and 256-byte tiles")
    a = ap.parse_args()
    dev = device_info(0)
    shapes = SHAPES if a.shapes is None else [tuple(int(v) for v in s.split("x")) for s in a.shapes.split(",")]
    if "sync" in a.what:
        sync_ab(dev, a, SYNC_SHAPES if a.shapes is None else shapes)
    if "rule" in a.what:
        rule(dev, a, RULE_SHAPES if a.shapes is None else shapes)
    if "ab" not in a.what and "parts" not in a.what:
        return
    for dt in a.dtypes.split(","):
        for O, L, I in shapes:
            x, y, fn, t_c, vec, cols, tol = setup(dt, O, L, I, a.log)
            t_d = timeit(lambda: fn(x, axis=1))
            plan = D._plan_cols_split(O, L, I, dt, dt, a.log, dev, vec)
            cur = D.plan_cols(O, L, I, dt, dt, a.log, dev, vec).kernel.split("<")[0]
            head = (f"{dt:9s} {(O, L, I)} tiles {plan.grid[0]} splits {plan.grid[1]} contig {t_c:6.1f} "
                    f"dispatch {t_d:6.1f} ({t_d / t_c:.2f}x, {cur})")
            print(head, flush=True)
            if "ab" in a.what:
                runs = {"old": Run(plan, x, y, O, L, I, "_old_softmax.cu", True),
                        "new": Run(plan, x, y, O, L, I)}
                ts, outs = {"old": [], "new": []}, {}
                for _ in range(3):
                    for k, r in runs.items():
                        y.fill(0)
                        r.whole()
                        outs[k] = cp.asnumpy(y).view(np.uint8).copy()
                        ts[k].append(timeit(r.whole))
                err = check(y, x, cols, a.log)
                o, n = min(ts["old"]), min(ts["new"])
                print(f"  ab: old {' '.join(f'{t:6.1f}' for t in ts['old'])} | new "
                      f"{' '.join(f'{t:6.1f}' for t in ts['new'])} | {o / n:.3f}x, new {n / t_c:.2f}x contig, "
                      f"same={np.array_equal(outs['old'], outs['new'])} err={err:.1e}"
                      + ("" if err < tol else " WRONG"), flush=True)
            if "parts" in a.what:
                r = Run(plan, x, y, O, L, I)
                r0 = Run(plan, x, y, O, L, I, opts=("-DCOLS_SPLIT_STOP=1",))
                r.whole()
                line = (f"  parts: partial {timeit(r.partial):.1f}, no merge {timeit(r0.partial):.1f}, "
                        f"finish {timeit(r.finish):.1f}, whole {timeit(r.whole):.1f}")
                print(line, flush=True)
                s0 = plan.grid[1]
                pu = int(plan.pre_kernel[:-1].split(", ")[-1])
                out = []
                for f in (0.25, 0.5, 1, 2, 4):
                    for u in sorted({1, pu, 2 * pu}):
                        if f == 1 and u == pu:
                            continue
                        p2 = with_unroll(resplit(plan, L, max(1, int(s0 * f))), u)
                        if p2.grid[1] > 65535:
                            continue
                        r2 = Run(p2, x, y, O, L, I)
                        y.fill(0)
                        r2.whole()
                        err = check(y, x, cols, a.log)
                        out.append(f"s{p2.grid[1]} u{u} {timeit(r2.whole):.1f} (partial {timeit(r2.partial):.1f})"
                                   + ("" if err < tol else " WRONG"))
                print("  splits/unroll: " + "; ".join(out), flush=True)
            cp.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    main()
