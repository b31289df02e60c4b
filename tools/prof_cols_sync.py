"""Where the time of softmax_cols_sync goes: the kernel compiled to end after
phase n (-DCOLS_SYNC_STOP=n: 1 loads and per-thread (m, d), 2 + block
reduction, partials and the tile barrier, 3 + the partials' merge; full),
and under other barrier poll intervals (-DCOLS_SYNC_POLL_NS), each timed like
the benchmark (CUDA events, L2 flushed, median of 30), against the same data
contiguous. Usage: PYTHONPATH=.:tools python tools/prof_cols_sync.py"""
import cupy as cp

import cusoftmax as cs
from cusoftmax import _dispatch as D
from cusoftmax._launch import Params, _coop_launch, device_info
from cusoftmax._loader import expanded_source, COMPILE_OPTIONS
from tune import timeit
from tune_cols import make

SHAPES = [(1, 2048, 4096), (1, 8192, 1024), (1, 16384, 512), (64, 512, 256), (1, 1000, 1000)]


def main():
    dev = device_info(0)
    src = expanded_source("softmax.cu")
    mods = {}
    for dt in ("bfloat16", "float32"):
        for O, L, I in SHAPES:
            x = make((O, L, I), dt)
            y = cp.empty_like(x)
            xc = make((O * I, L), dt)
            t_c = timeit(lambda: cs.softmax(xc, axis=-1))
            p = D.plan_cols(O, L, I, dt, dt, False, dev, 16 // x.dtype.itemsize)
            if not p.kernel.startswith("softmax_cols_sync"):
                print(dt, (O, L, I), "not sync:", p.kernel)
                continue
            tx, splits, tiles, nr = p.extra
            part = cp.empty(p.ws_elems, cp.float32)
            cnt = cp.zeros(tiles * 2 + 64, cp.uint32)
            prm = Params((x.data.ptr, y.data.ptr, O, L, I, L * I, I, L * I, I, splits, tx, part.data.ptr,
                          cnt.data.ptr))
            line = f"{dt:9s} {(O, L, I)} grid {p.grid[0]} splits {splits} contig {t_c:.1f}:"
            for opts in [("-DCOLS_SYNC_STOP=1",), ("-DCOLS_SYNC_STOP=2",), ("-DCOLS_SYNC_STOP=3",), (),
                         ("-DCOLS_SYNC_POLL_NS=32",), ("-DCOLS_SYNC_POLL_NS=512",)]:
                mk = (opts, p.kernel)
                if mk not in mods:
                    mods[mk] = cp.RawModule(code=src, options=COMPILE_OPTIONS + opts,
                                            name_expressions=[p.kernel])
                fn = mods[mk].get_function(p.kernel)
                if p.smem:
                    fn.max_dynamic_shared_size_bytes = p.smem

                def run():
                    rc = _coop_launch(fn.kernel.ptr, p.grid[0], 1, 1, 256, 1, 1, p.smem,
                                      cp.cuda.get_current_stream().ptr, prm.addr)
                    assert rc == 0, rc
                t = timeit(run)
                line += f" {' '.join(o[2:] for o in opts) or 'full'} {t:.1f}"
            print(line, flush=True)


if __name__ == "__main__":
    main()
