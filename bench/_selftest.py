"""Self-test of the reporting path on SYNTHETIC rows (no GPU needed).

``python -m bench selftest [--out DIR]`` builds fake rows for every suite from
the real case lists and a made-up latency + bandwidth model, then runs the
same writer the benchmark uses (JSON, CSV, markdown with targets, plots,
SUMMARY.md) and checks the files. The data is marked synthetic in every file
and is refused under bench/results/.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile

from . import _report
from ._suites import SUITES, add_timing, base_row
from ._timing import Timing

#: provider -> (launch latency us, bandwidth GB/s): invented, for the self-test only.
MODEL = {"cusoftmax": (3.0, 2800.0), "cusoftmax-online": (4.0, 2100.0), "cusoftmax-safe": (4.0, 1700.0),
         "cusoftmax-naive": (4.0, 2000.0), "cusoftmax-unfused": (6.0, 900.0), "torch": (5.0, 1800.0),
         "triton": (4.0, 2500.0), "cupyx": (15.0, 450.0), "cupy": (60.0, 90.0)}
PROVIDERS = {"softmax": ("cusoftmax", "cusoftmax-online", "cusoftmax-safe", "cusoftmax-naive", "torch",
                         "triton", "cupyx"),
             "backward": ("cusoftmax", "torch"), "topk": ("cusoftmax", "torch", "cupy"),
             "paper": ("cusoftmax", "cusoftmax-online", "cusoftmax-safe", "cusoftmax-naive"),
             "paper-topk": ("cusoftmax", "cusoftmax-online", "cusoftmax-safe", "cusoftmax-unfused")}
CEILING = 3000.0


def _meta(suite):
    return {"device_name": "SYNTHETIC (self-test)", "device_slug": "selftest", "compute_capability": "90",
            "sm_count": 132, "l2_bytes": 50 << 20, "ceiling_GBps": CEILING, "reps_min": 50, "quick": False,
            "flush_bytes": 256 << 20, "synthetic": True, "date_utc": "synthetic", "command": "selftest",
            "copy": {"memcpy_d2d": {"GBps": CEILING, "median_us": 715.8, "bytes": 2 << 30, "reps": 50}},
            "notes": ["synthetic rows: the report path's self-test, not a measurement"]}


def fake_rows(suite_name):
    suite = SUITES[suite_name]
    rows = []
    for case in suite.cases(False):
        for op in suite.ops:
            for p in PROVIDERS[suite_name]:
                r = base_row(suite_name, op, p, p.split("-")[0], case)
                if p == "triton" and case.cols > 131072:
                    r.update(status="skipped", note="row does not fit one program (BLOCK_SIZE > 131072)")
                elif p == "cupyx" and case.out_dtype:
                    r.update(status="skipped", note="cupyx.scipy.special has no dtype= argument")
                elif p == "cupy" and case.n > (1 << 28):
                    r.update(status="skipped", note="pathologically slow: one flushed call took 312000 us")
                else:
                    lat, bw = MODEL[p]
                    t = lat + r["bytes"] / (bw * 1e3)
                    add_timing(r, case, Timing(t, t * 0.98, t * 0.99, t * 1.02, 50, 3), CEILING)
                    r["check"], r["check_err"] = "ok", 0.01
                rows.append(r)
    if rows:
        rows[1]["check"] = "MISMATCH (max |err|/tol = 12.5)"
        rows[2].update(noisy=True, spread=0.4, attempts=3)
        rows.append(dict(rows[0], provider="cupyx", status="error", note="TypeError: synthetic failure"))
    if suite_name in ("softmax", "backward", "topk"):
        for op in suite.ops:
            for p, us in (("cusoftmax", 6.0), ("torch", 5.0), ("cupyx", 40.0)):
                rows.append({"suite": suite_name, "op": "host:" + op, "provider": p, "family": p,
                             "shape": [4, 4], "dtype": "float32", "status": "ok", "note": "", "host_us": us,
                             "host_samples": [us] * 5})
    return rows


def run(out=None) -> int:
    out = out or tempfile.mkdtemp(prefix="bench-selftest-")
    res = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    if os.path.realpath(out).startswith(res + os.sep) and "selftest" not in os.path.basename(out):
        print("selftest: refusing to write synthetic data under bench/results/", file=sys.stderr)
        return 2
    problems = []
    for name in list(SUITES) + ["copy"]:
        rows = fake_rows(name) if name in SUITES else []
        data = {"suite": name, "meta": _meta(name), "rows": rows}
        files = _report.save_raw(out, data) + _report.render(out, data)
        for f in files:
            if not os.path.getsize(f):
                problems.append(f"{f} is empty")
        md = open(os.path.join(out, name, f"{name}.md")).read()
        if "SYNTHETIC" not in md:
            problems.append(f"{name}.md does not say SYNTHETIC")
        if name in ("softmax", "backward", "topk") and not ("MET" in md or "MISSED" in md):
            problems.append(f"{name}.md has no evaluated target")
        if name != "copy" and not any(f.endswith(".png") for f in files):
            problems.append(f"{name}: no plot written")
        if len(os.listdir(os.path.join(out, name))) > 8:
            problems.append(f"{name}: more than 8 files")
        back = _report.load(out, name)
        if json.dumps(back["rows"], default=str) != json.dumps(rows, default=str):
            problems.append(f"{name}: JSON round trip changed the rows")
        print(f"selftest {name}: {len(rows)} rows -> " + ", ".join(os.path.basename(f) for f in files))
    summ = _report.write_summary(out)
    text = open(summ).read()
    for name in SUITES:
        if f"[{name}]" not in text:
            problems.append(f"SUMMARY.md lacks {name}")
    print(f"selftest: output in {out}")
    if problems:
        print("selftest FAILED:\n  " + "\n  ".join(problems))
        return 1
    print("selftest passed")
    return 0
