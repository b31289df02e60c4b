"""``python -m bench <suite> [options]``: see ``python -m bench --help`` and bench/README.md."""
from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")


def _parser():
    from ._suites import SUITES

    lines = ["suites:"]
    lines += [f"  {s.name:<11} {s.help}" + (f" (needs cusoftmax.{s.needs})" if s.needs else "")
              for s in SUITES.values()]
    lines += ["  copy        the copy-bandwidth ceiling alone (1 GiB device-to-device memcpy)",
              "  all         copy, softmax, backward, topk, paper, paper-topk (~8 min on an H100)",
              "",
              "other commands (no GPU needed):",
              "  report      rebuild tables, plots and SUMMARY.md from the JSON under --out",
              "  selftest    run the report path on synthetic rows (into a temporary folder)",
              "",
              "examples:",
              "  python -m bench softmax --quick             # a handful of shapes, few reps",
              "  python -m bench all                         # results in bench/results/<gpu>/",
              "  python -m bench softmax --providers 'cusoftmax,torch'",
              "  python -m bench --providers                 # list the providers importable here"]
    ap = argparse.ArgumentParser(prog="python -m bench", description="cusoftmax benchmarks: CUDA-event "
                                 "timing with L2 flushed between reps, bandwidth of minimum traffic.",
                                 epilog="\n".join(lines), formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("suite", nargs="?", choices=list(SUITES) + ["copy", "all", "report", "selftest"],
                    metavar="suite", help="one of: " + ", ".join(list(SUITES) + ["copy", "all", "report",
                                                                                 "selftest"]))
    ap.add_argument("--quick", action="store_true", help="a handful of shapes and 10 reps (debugging only)")
    ap.add_argument("--out", help="output folder (default bench/results/<gpu-name-slug>/, "
                                  "or <slug>-quick/ with --quick)")
    ap.add_argument("--reps", type=int, default=None,
                    help="minimum timed reps per case (default 50; 10 with --quick; >= 50 for reported results)")
    ap.add_argument("--providers", nargs="?", const="list", default=None, metavar="NAMES",
                    help="comma-separated provider names or globs to run (e.g. 'cusoftmax*,torch'); "
                         "alone: list the providers available here and exit")
    ap.add_argument("--no-check", action="store_true", help="skip the reference spot-checks")
    ap.add_argument("--no-plots", action="store_true", help="write no PNGs")
    ap.add_argument("--case-budget", type=float, default=5.0, metavar="S",
                    help="skip (and record) a provider whose reps on one case would take over S seconds "
                         "(default 5)")
    ap.add_argument("--verbose", action="store_true", help="print tracebacks of failing providers")
    return ap


def _report_only(out):
    from . import _report

    if out:
        outs = [out]
    elif os.path.isdir(RESULTS):
        outs = [os.path.join(RESULTS, d) for d in sorted(os.listdir(RESULTS))
                if os.path.isdir(os.path.join(RESULTS, d))]
    else:
        outs = []
    for o in outs:
        for d in sorted(os.listdir(o)):
            jp = os.path.join(o, d, f"{d}.json")
            if os.path.isfile(jp):
                for p in _report.render(o, _report.load(o, d)):
                    print(p)
        print(_report.write_summary(o))
    return 0


class _Terminated(BaseException):
    """SIGTERM (e.g. ``timeout``): unwind so the suite in progress is saved."""


def _on_sigterm(signum, frame):
    raise _Terminated()


def main(argv=None) -> int:
    signal.signal(signal.SIGTERM, _on_sigterm)
    ap = _parser()
    args = ap.parse_args(argv)
    if args.providers == "list":
        from ._providers import describe
        print(describe())
        return 0
    if args.suite is None:
        ap.print_help()
        return 2
    if args.suite == "report":
        return _report_only(args.out)
    if args.suite == "selftest":
        from ._selftest import run
        return run(args.out)

    from . import _env, _report
    from ._cases import InputPool
    from ._suites import ALL, SUITES, Context, first_call_seconds, missing_function, run_suite
    from ._timing import Timer

    try:
        import cupy
        if cupy.cuda.runtime.getDeviceCount() < 1:
            raise RuntimeError("CUDA reports no devices")
    except Exception as e:  # noqa: BLE001
        print(f"bench: no usable GPU ({type(e).__name__}: {e}); nothing timed.", file=sys.stderr)
        return 1

    reps = args.reps or (10 if args.quick else 50)
    if reps < 50:
        print(f"bench: {reps} reps per case: fine for debugging, not for reported results", file=sys.stderr)
    names = list(ALL) if args.suite == "all" else [args.suite]
    meta = _env.device_meta()
    out = args.out or os.path.join(RESULTS, meta["device_slug"] + ("-quick" if args.quick else ""))
    t_start = time.time()

    timer = Timer(min_reps=reps, case_budget_s=args.case_budget)
    copy = timer.copy_ceiling()
    meta.update(copy=copy, ceiling_GBps=copy["memcpy_d2d"]["GBps"], reps_min=reps, quick=args.quick,
                flush_bytes=timer.flush_bytes, case_budget_s=args.case_budget,
                providers=args.providers, command="python -m bench " + " ".join(
                    shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])))
    print(f"{meta['device_name']}: copy ceiling {meta['ceiling_GBps'] / 1e3:.3f} TB/s; out {out}", flush=True)

    runnable = []
    for name in names:
        if name == "copy":
            continue
        why = missing_function(SUITES[name])
        if why:
            print(f"bench: {why}", flush=True)
        else:
            runnable.append(SUITES[name])
    written = []
    if "copy" in names:
        data = {"suite": "copy", "meta": dict(meta, notes=[]), "rows": []}
        written += _report.save_raw(out, data) + _report.render(out, data, plots=False)
    if runnable:
        pool = InputPool([c for s in runnable for c in s.cases(args.quick)])
        ctx = Context(timer, pool, meta["ceiling_GBps"], check=not args.no_check, verbose=args.verbose)
        for suite in runnable:
            notes, rows = [], []
            t0 = time.time()
            print(f"== suite {suite.name}", flush=True)
            try:
                run_suite(ctx, suite, args.quick, args.providers, notes, rows)
            except KeyboardInterrupt:
                notes.append("interrupted: partial results")
                raise
            except _Terminated:
                notes.append("terminated (SIGTERM): partial results")
                raise
            finally:
                data = {"suite": suite.name, "rows": rows,
                        "meta": dict(meta, notes=notes, suite_seconds=round(time.time() - t0, 1),
                                     first_call_seconds=first_call_seconds(rows))}
                written += _report.save_raw(out, data)
                written += _report.render(out, data, plots=not args.no_plots)
                written.append(_report.write_summary(out))
            print(f"== suite {suite.name}: {len(rows)} rows in {time.time() - t0:.0f} s; first calls "
                  f"(compiles) by provider, s: {first_call_seconds(rows)}", flush=True)
    written.append(_report.write_summary(out))
    print(f"bench: done in {time.time() - t_start:.0f} s; files:")
    for p in dict.fromkeys(written):
        print("  " + p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
