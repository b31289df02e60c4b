"""Pieces shared by the strided-axis (cols) experiment tools
(tools/sync_skew_try.py, tools/sync_balance_try.py): the common arguments,
the shape list, one case's arrays and reference, and the error check.
Nothing here touches the GPU at import."""
import numpy as np

from cusoftmax import reference as ref

#: Error bound of a checked output, by dtype (log_softmax: relative to max(1, |reference|)).
TOL = {"float32": 1e-5, "bfloat16": 1e-2, "float16": 1e-2}


def add_common_args(ap) -> None:
    """--log, --dtypes, --rounds, --shapes."""
    ap.add_argument("--log", action="store_true")
    ap.add_argument("--dtypes", default="float32,bfloat16,float16")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--shapes", default=None, help="LxI or OxLxI, comma-separated")


def parse_shapes(arg, default) -> list:
    """``arg`` ("LxI" or "OxLxI", comma-separated) as (O, L, I) tuples; ``default`` when empty."""
    if not arg:
        return list(default)
    return [tuple(int(n) for n in s.split("x")) if s.count("x") == 2 else (1,) + tuple(int(n) for n in s.split("x"))
            for s in arg.split(",")]


def case(O, L, I, dt, log):
    """(x, xc, y, cols, r): random (O, L, I) data, the same count of elements
    as contiguous rows (O * I, L), an output buffer, the columns checked (a
    strided subset above 2^24 elements) and their float64 reference."""
    import cupy as cp
    from tune_cols import make  # (imports tune, which allocates its L2 flush buffer)

    x = make((O, L, I), dt)
    xc = make((O * I, L), dt)
    y = cp.empty_like(x)
    cols = np.arange(0, I, max(1, I // 64)) if x.size > (1 << 24) else slice(None)
    r = (ref.log_softmax if log else ref.softmax)(x[:, :, cols], axis=1)
    return x, xc, y, cols, r


def err_of(y, r, cols, log) -> float:
    """The largest error of y's ``cols`` against the reference ``r`` (inf on NaN)."""
    got = ref.to_float64(y[:, :, cols])
    if np.isnan(got).any():
        return float("inf")
    if log:
        return float(np.max(np.abs(got - r) / np.maximum(1, np.abs(r))))
    return float(np.max(np.abs(got - r)))


def timed_calls(fn, x, xc, y, cols, r, dt, log, plans, skip=False) -> tuple:
    """({name: call}, [names whose output failed]): ``contig`` (``fn`` on the
    contiguous rows), ``auto`` (the public call into y), then each of
    ``plans`` ({name: LaunchPlan}) launched directly on x / y. Every call but
    contig is checked against the reference once, y poisoned first.
    ``skip``: a plan whose launch raises (other than a CUDA error, which
    leaves the context unusable) is reported and left out, and plans whose
    output failed are left out of the calls (still listed)."""
    from cusoftmax._launch import Launch

    O, L, I = x.shape

    def check(call):
        y.fill(np.nan)
        call()
        return err_of(y, r, cols, log) <= TOL[dt]

    fs = {"contig": lambda: fn(xc, axis=-1), "auto": lambda: fn(x, axis=1, out=y)}
    bad = [] if check(fs["auto"]) else ["auto"]
    for name, p in plans.items():
        ln, f = Launch(p, x.data.device_id), p.fold  # (a folded plan runs on (L / f, I x f), as the library launches it)
        call = (lambda ln=ln, f=f: ln.cols(x.data.ptr, y.data.ptr, O, L // f, I * f, L * I, I * f, L * I, I * f))
        try:
            ok = check(call)
        except Exception as e:
            if not skip or "CUDA_ERROR" in str(e) or "cudaError" in str(e):
                raise
            print(f"    (not run: {name}: {str(e)[:120]})", flush=True)
            continue
        if not ok:
            bad.append(name)
        if ok or not skip:
            fs[name] = call
    return fs, bad
