"""Which speed-up targets a committed benchmark run could meet at all.

A call cannot take less than the flushed-event harness's empty kernel
(EMPTY_US, tools/prof_floor.py: 3.49 us on the H100, CUDA events around one
empty launch after the 256 MiB L2 flush) plus its minimum traffic at the run's
device-to-device copy bandwidth (the suite's ``meta.copy.memcpy_d2d``). A
target "at least F x torch" on a case is out of reach when torch's time / F
is below that bound. This prints, per target, the cases met, the cases out
of reach by that bound (a lower bound on the time: more may be), and those
out of reach.

    python tools/feasibility.py [results dir] [--bw=GBPS]   (default: bench/results/nvidia-h100-80gb-hbm3)

``--bw=GBPS`` replaces the measured copy bandwidth, e.g. ``--bw=3350`` (the H100
SXM's nominal HBM3 bandwidth, above any measured copy): a looser bound, so
fewer cases out of reach.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from bench._report import speedups  # noqa: E402  (the report's own case selection)

EMPTY_US = 3.49

_few = lambda r: r["rows"] <= 64 and r["cols"] >= 32768  # noqa: E731
# (suite, label, ops, factor, case filter): as in bench/_report.py's targets
TARGETS = [
    ("softmax", "issue 3, 3a: rows <= 64, cols >= 32768: >= 4x torch", ("softmax", "log_softmax"), 4.0, _few),
    ("backward", "issue 4, 3: rows <= 64, cols >= 32768: >= 4x torch",
     ("softmax_backward", "log_softmax_backward"), 4.0, _few),
    ("topk", "issue 5, 2a: rows <= 64, cols >= 32768, k <= 50: >= 10x torch", ("softmax_topk",), 10.0,
     lambda r: _few(r) and r["k"] <= 50),
]


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--bw")]
    bw_arg = [float(a.split("=", 1)[1]) for a in sys.argv[1:] if a.startswith("--bw=")]
    root = args[0] if args else "bench/results/nvidia-h100-80gb-hbm3"
    for suite, label, ops, factor, sel in TARGETS:
        path = os.path.join(root, suite, f"{suite}.json")
        if not os.path.exists(path):
            print(f"{label}: no {path}")
            continue
        d = json.load(open(path))
        bw = (bw_arg[0] if bw_arg else d["meta"]["copy"]["memcpy_d2d"]["GBps"]) * 1e3  # bytes per us
        sp = [s for op in ops for s in speedups(d["rows"], op, "torch", where=sel)]
        met = sum(1 for _, x, _ in sp if x >= factor)
        out = []
        for key, x, r in sorted(sp, key=lambda s: str(s[0])):
            torch_us = x * r["median_us"]
            need, bound = torch_us / factor, EMPTY_US + r["bytes"] / bw
            if need < bound:
                out.append(f"{r['op']} {r['label']} {r['dtype']}: torch {torch_us:.1f} us / {factor:g} = "
                           f"{need:.1f} < {bound:.1f} (cusoftmax {r['median_us']:.1f})")
        what = "given" if bw_arg else "copy"
        print(f"{label} [commit {d['meta'].get('cusoftmax_commit')}, {what} {bw / 1e3:.0f} GB/s]: "
              f"{len(sp)} cases, {met} met, {len(out)} out of reach")
        for o in out:
            print(f"    {o}")


if __name__ == "__main__":
    main()
