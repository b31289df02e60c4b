"""The one report writer: raw data (JSON + CSV), a markdown table with the
targets of the issues evaluated, and PNG plots, for every suite.

Everything here works from the saved JSON alone (no GPU), so
``python -m bench report --out DIR`` rebuilds tables and plots anywhere.

Layout of an output folder::

    DIR/SUMMARY.md                    targets of every suite found in DIR
    DIR/<suite>/<suite>.json          meta (device, versions, date, copy ceiling) + rows
    DIR/<suite>/<suite>.csv           the rows, flat
    DIR/<suite>/<suite>.md            tables + targets
    DIR/<suite>/*.png                 plots
"""
from __future__ import annotations

import csv
import glob
import json
import math
import os
from collections import OrderedDict

from ._providers import ORDER
from ._timing import NOISE_SPREAD as NOISE

CSV_FIELDS = ("suite", "op", "provider", "label", "shape", "rows", "cols", "dtype", "out_dtype", "axis",
              "layout", "k", "bytes", "status", "check", "median_us", "min_us", "p10_us", "p90_us", "reps",
              "GBps", "fraction_of_copy", "elements_per_s", "host_us", "note")
DTYPE_ORDER = ("float32", "bfloat16", "float16", "float64")
SHORT = {"float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64"}
MIB = 1 << 20


# ----------------------------------------------------------------------------
# Raw data
# ----------------------------------------------------------------------------
def suite_dir(out_dir, suite):
    return os.path.join(out_dir, suite)


def save_raw(out_dir, data) -> list:
    d = suite_dir(out_dir, data["suite"])
    os.makedirs(d, exist_ok=True)
    jp = os.path.join(d, f"{data['suite']}.json")
    with open(jp, "w") as f:
        json.dump(data, f, indent=1, default=str)
    paths = [jp]
    if data["rows"]:
        cp = os.path.join(d, f"{data['suite']}.csv")
        with open(cp, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=CSV_FIELDS, extrasaction="ignore")
            w.writeheader()
            for r in data["rows"]:
                r2 = dict(r)
                r2["shape"] = "x".join(str(s) for s in r.get("shape", []))
                w.writerow(r2)
        paths.append(cp)
    return paths


def load(out_dir, suite):
    p = os.path.join(suite_dir(out_dir, suite), f"{suite}.json")
    with open(p) as f:
        return json.load(f)


# ----------------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------------
def _ok(rs, **kw):
    """Timed rows whose fields equal ``kw``."""
    return [r for r in rs if r.get("status") == "ok" and "median_us" in r
            and all(r.get(k) == v for k, v in kw.items())]


def _key(r):
    return (r["op"], r["label"], r["dtype"])


def _index(rows):
    """{(op, label, dtype): {provider: row}} over timed rows, in first-seen order."""
    idx: OrderedDict = OrderedDict()
    for r in rows:
        if r["op"].startswith("host:"):
            continue
        idx.setdefault(_key(r), {})[r["provider"]] = r
    return idx


def _providers(rows):
    names = {r["provider"] for r in rows if not r["op"].startswith("host:")}
    return sorted(names, key=lambda n: ORDER.index(n) if n in ORDER else len(ORDER))


def geomean(xs):
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def _g(x, digits=3):
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    return f"{x:.{digits}g}"


def _tb(r):
    return r["GBps"] / 1e3


def speedups(rows, op, peer, ref="cusoftmax", where=None):
    """[(key, peer_time / ref_time, ref_row)] for cases where both were timed."""
    out = []
    for key, by in _index(rows).items():
        if key[0] != op or ref not in by or peer not in by:
            continue
        a, b = by[ref], by[peer]
        if a.get("status") != "ok" or b.get("status") != "ok" or "median_us" not in a or "median_us" not in b:
            continue
        if where is not None and not where(a):
            continue
        out.append((key, b["median_us"] / a["median_us"], a))
    return out


def _target(name, need, figure, met, detail=""):
    return {"target": name, "need": need, "figure": figure,
            "status": "n/a" if met is None else ("MET" if met else "MISSED"), "detail": detail}


def _na(name, need, why):
    return _target(name, need, "-", None, why)


# ----------------------------------------------------------------------------
# Targets (issues 3, 4, 5) and the paper comparisons
# ----------------------------------------------------------------------------
def _frac_target(rows, ops, min_traffic, name, thr=0.9):
    sel = [r for r in _ok(rows, provider="cusoftmax") if r["op"] in ops and r["bytes"] >= min_traffic
           and r["dtype"] in ("float32", "bfloat16")]
    if not sel:
        return _na(name, f">= {thr:.0%} of copy", "no cusoftmax timings at that size")
    worst = min(sel, key=lambda r: r["fraction_of_copy"])
    below = [r for r in sel if r["fraction_of_copy"] < thr]
    met = not below
    detail = (f"{len(sel) - len(below)}/{len(sel)} shapes at >= {thr:.0%}; worst {worst['op']} "
              f"{worst['label']} {SHORT[worst['dtype']]} at {worst['fraction_of_copy']:.1%} "
              f"({_tb(worst):.2f} TB/s)")
    if below:
        detail += f", short by {thr - worst['fraction_of_copy']:.1%} of copy"
        detail += "; below: " + ", ".join(f"{r['op']} {r['label']} {SHORT[r['dtype']]} "
                                           f"{r['fraction_of_copy']:.0%}" for r in below[:12])
        if len(below) > 12:
            detail += f", ... ({len(below) - 12} more)"
    return _target(name, f">= {thr:.0%} of copy", f"min {worst['fraction_of_copy']:.1%}", met, detail)


def _ratio_min_target(rows, ops, peer, thr, name, where=None, need=None):
    sp = [s for op in ops for s in speedups(rows, op, peer, where=where)]
    need = need or f">= {thr:g}x {peer}"
    if not sp:
        return _na(name, need, f"no case with both cusoftmax and {peer} timed")
    key, worst, _ = min(sp, key=lambda s: s[1])
    below = [s for s in sp if s[1] < thr]
    detail = f"{len(sp) - len(below)}/{len(sp)} cases meet it; worst {key[0]} {key[1]} {SHORT[key[2]]}: {worst:.2f}x"
    if below:
        detail += f" (short by {thr - worst:.2f}x); below: " + ", ".join(
            f"{k[0]} {k[1]} {SHORT[k[2]]} {v:.2f}x" for k, v, _ in sorted(below, key=lambda s: s[1])[:10])
        if len(below) > 10:
            detail += f", ... ({len(below) - 10} more)"
    return _target(name, need, f"min {worst:.2f}x", not below, detail)


def _ratio_geo_target(rows, ops, peer, thr, name):
    sp = [s for op in ops for s in speedups(rows, op, peer)]
    if not sp:
        return _na(name, f"geomean >= {thr:g}x {peer}", f"no case with both cusoftmax and {peer} timed")
    g = geomean([s[1] for s in sp])
    detail = f"over {len(sp)} cases" + ("" if g >= thr else f"; short by {thr - g:.2f}x")
    return _target(name, f"geomean >= {thr:g}x {peer}", f"{g:.2f}x", g >= thr, detail)


def _time_target(rows, op, label, dtype, limit_us, name, k=None):
    sel = [r for r in _ok(rows, provider="cusoftmax", op=op, label=label, dtype=dtype)]
    if not sel:
        return _na(name, f"<= {limit_us:g} us", f"{label} {dtype} not timed")
    t = sel[0]["median_us"]
    return _target(name, f"<= {limit_us:g} us", f"{t:.2f} us", t <= limit_us,
                   "" if t <= limit_us else f"over by {t - limit_us:.2f} us")


def _host_target(rows, op, thr, name):
    h = {r["provider"]: r for r in rows if r["op"] == "host:" + op and r.get("status") == "ok"}
    if "cusoftmax" not in h or "torch" not in h:
        return _na(name, f"<= {thr:g}x torch host time", "cusoftmax or torch host time missing")
    a, b = h["cusoftmax"]["host_us"], h["torch"]["host_us"]
    detail = f"cusoftmax {a:.2f} us/call, torch {b:.2f} us/call" + (
        f", cupyx {h['cupyx']['host_us']:.2f} us/call" if "cupyx" in h else "")
    if a > thr * b:
        detail += f"; over by {a - thr * b:.2f} us"
    return _target(name, f"<= {thr:g}x torch", f"{a / b:.2f}x torch", a <= thr * b, detail)


def _cliff_target(rows, meta, name, rows_n=4096, thr=0.15):
    from ._cases import GRID_COLS
    adjacent = set(zip(GRID_COLS, GRID_COLS[1:]))
    l2 = meta.get("l2_bytes") or 50 * MIB
    worst = None
    n_pairs = 0
    for op in sorted({r["op"] for r in rows if not r["op"].startswith("host:")}):
        for dt in DTYPE_ORDER:
            pts = sorted((r["cols"], r["GBps"], r["bytes"]) for r in
                         _ok(rows, provider="cusoftmax", op=op, dtype=dt, rows=rows_n, grid=True))
            for (c0, g0, b0), (c1, g1, b1) in zip(pts, pts[1:]):
                if (c0, c1) not in adjacent:  # only neighbours in the column list
                    continue
                if min(b0, b1) <= l2:  # at or below the L2-to-DRAM transition
                    continue
                n_pairs += 1
                drop = 1 - g1 / g0
                if worst is None or drop > worst[0]:
                    worst = (drop, op, dt, c0, c1)
    if worst is None:
        return _na(name, f"no drop > {thr:.0%}", f"no {rows_n}-row grid pairs above the L2 size")
    drop, op, dt, c0, c1 = worst
    detail = (f"{n_pairs} adjacent pairs with traffic > L2 ({l2 / MIB:.0f} MiB); largest drop "
              f"{op} {SHORT[dt]} {c0} -> {c1} cols: {max(drop, 0):.1%}")
    if drop > thr:
        detail += f" (over by {drop - thr:.1%})"
    return _target(name, f"no drop > {thr:.0%}", f"max drop {max(drop, 0):.1%}", drop <= thr, detail)


def targets_softmax(rows, meta):
    F = ("softmax", "log_softmax")
    few = lambda r: r["rows"] <= 64 and r["cols"] >= 32768  # noqa: E731
    return [
        _frac_target(rows, F, 32 * MIB, "1. >= 90% of copy where traffic >= 32 MiB (f32, bf16)"),
        _ratio_min_target(rows, F, "torch", 0.97, "2a. >= 0.97x torch at every shape"),
        _ratio_geo_target(rows, F, "torch", 1.5, "2b. geomean >= 1.5x torch"),
        _ratio_min_target(rows, F, "torch", 4.0, "3a. rows <= 64, cols >= 32768: >= 4x torch", where=few),
        _time_target(rows, "softmax", "1x128256", "float32", 8.0, "3b. (1, 128256) f32 softmax <= 8 us"),
        _ratio_geo_target(rows, ("softmax",), "cupyx", 4.0, "4a. softmax geomean >= 4x cupyx"),
        _ratio_geo_target(rows, ("log_softmax",), "cupyx", 6.0, "4b. log_softmax geomean >= 6x cupyx"),
        _cliff_target(rows, meta, "5. no cliff > 15% between adjacent cols at 4096 rows"),
        _host_target(rows, "softmax", 1.5, "6. host time per call <= 1.5x torch.softmax"),
    ]


def targets_backward(rows, meta):
    B = ("softmax_backward", "log_softmax_backward")
    few = lambda r: r["rows"] <= 64 and r["cols"] >= 32768  # noqa: E731
    return [
        _frac_target(rows, B, 48 * MIB, "1. >= 90% of copy (3 accesses) where traffic >= 48 MiB"),
        _ratio_geo_target(rows, B, "torch", 1.8, "2a. geomean >= 1.8x torch backward"),
        _ratio_min_target(rows, B, "torch", 1.0, "2b. never slower than torch", need=">= 1.0x torch"),
        _ratio_min_target(rows, B, "torch", 4.0, "3. rows <= 64, cols >= 32768: >= 4x torch", where=few),
        _host_target(rows, "softmax_backward", 1.5, "info: host time per call vs torch (no target)"),
    ]


def _bw_at_least(rows, label, ks, gbps, name):
    sel = [r for r in _ok(rows, provider="cusoftmax", op="softmax_topk", dtype="float32")
           if r["shape"] == [4096, 131072] and r["k"] in ks]
    if not sel:
        return _na(name, f">= {gbps / 1e3:g} TB/s", f"{label} not timed for k in {ks}")
    worst = min(sel, key=lambda r: r["GBps"])
    detail = ", ".join(f"k={r['k']}: {_tb(r):.2f} TB/s" for r in sorted(sel, key=lambda r: r["k"]))
    if worst["GBps"] < gbps:
        detail += f"; short by {(gbps - worst['GBps']) / 1e3:.2f} TB/s"
    return _target(name, f">= {gbps / 1e3:g} TB/s", f"min {_tb(worst):.2f} TB/s", worst["GBps"] >= gbps,
                   detail)


def targets_topk(rows, meta):
    T = ("softmax_topk",)
    few = lambda r: r["rows"] <= 64 and r["cols"] >= 32768 and r["k"] <= 50  # noqa: E731
    return [
        _bw_at_least(rows, "4096x131072", (1, 5, 10, 50), 2400, "1a. 4096x131072 f32, k <= 50: >= 2.4 TB/s"),
        _bw_at_least(rows, "4096x131072", (256,), 1500, "1b. 4096x131072 f32, k = 256: >= 1.5 TB/s"),
        _bw_at_least(rows, "4096x131072", (1024,), 750, "1c. 4096x131072 f32, k = 1024: >= 0.75 TB/s"),
        _ratio_min_target(rows, T, "torch", 10.0, "2a. rows <= 64, cols >= 32768, k <= 50: >= 10x torch",
                          where=few),
        _time_target(rows, "softmax_topk", "1x128256 k=50", "float32", 15.0, "2b. (1, 128256) f32 k=50 <= 15 us"),
        _ratio_min_target(rows, T, "torch", 1.0, "3. faster than torch at every shape and k",
                          need="> 1.0x torch"),
        _ratio_geo_target(rows, T, "cupy", 1.0, "info: geomean vs the CuPy way (no target)"),
    ]


PAPER_REF = {4000: 1.3, 10: 1.15}   # online / safe, V100, Figures 1-2
PAPER_TOPK_REF = {"batch4000_max": 5.0, "batch10": (1.5, 2.5), "k": {10: 3.5, 15: 2.0, 30: 1.4}}


def _by_v(rows, provider, batch, k=None):
    return {r["cols"]: r for r in _ok(rows, provider=provider) if r["rows"] == batch
            and (k is None or r["k"] == k)}


def paper_ratios(rows, num="cusoftmax-online", den="cusoftmax-safe", k=None):
    """{batch: [(V, time_den / time_num)]}"""
    out = {}
    for b in sorted({r["rows"] for r in rows if "rows" in r}, reverse=True):
        a, s = _by_v(rows, num, b, k), _by_v(rows, den, b, k)
        out[b] = [(v, s[v]["median_us"] / a[v]["median_us"]) for v in sorted(set(a) & set(s))]
    return out


def targets_paper(rows, meta):
    out = []
    for b, pts in paper_ratios(rows).items():
        big = [x for v, x in pts if v >= 4000]
        ref = PAPER_REF.get(b)
        if not big:
            out.append(_na(f"online / safe, batch {b}, V >= 4000", f"paper V100 ~{ref}x", "not timed"))
            continue
        out.append({"target": f"online / safe, batch {b}, V >= 4000", "need": f"paper (V100): ~{ref}x",
                    "figure": f"geomean {geomean(big):.2f}x", "status": "info",
                    "detail": f"range {min(big):.2f}-{max(big):.2f}x over {len(big)} sizes"})
    for b, pts in paper_ratios(rows, num="cusoftmax", den="cusoftmax-online").items():
        if pts:
            out.append({"target": f"auto / online speed-up, batch {b}", "need": "(where auto stands)",
                        "figure": f"geomean {geomean([x for _, x in pts]):.2f}x", "status": "info",
                        "detail": f"range {min(x for _, x in pts):.2f}-{max(x for _, x in pts):.2f}x"})
    return out


def targets_paper_topk(rows, meta):
    from ._cases import PAPER_K_SWEEP_V, PAPER_TOPK_K
    out = []
    r5 = paper_ratios(rows, num="cusoftmax-online", den="cusoftmax-unfused", k=PAPER_TOPK_K)
    for b, pts in r5.items():
        if not pts:
            continue
        v, best = max(pts, key=lambda p: p[1])
        at = dict(pts).get(PAPER_K_SWEEP_V)
        need = "paper (V100): up to 5x at V=25000" if b == 4000 else "paper (V100): 1.5-2.5x"
        out.append({"target": f"online fused / safe unfused, K={PAPER_TOPK_K}, batch {b}", "need": need,
                    "figure": f"max {best:.2f}x at V={v}", "status": "info",
                    "detail": f"range {min(x for _, x in pts):.2f}-{best:.2f}x"
                              + (f"; at V={PAPER_K_SWEEP_V}: {at:.2f}x" if at else "")})
    for kk, ref in PAPER_TOPK_REF["k"].items():
        pts = paper_ratios(rows, num="cusoftmax-online", den="cusoftmax-unfused", k=kk)
        fig = ", ".join(f"batch {b}: {dict(p).get(PAPER_K_SWEEP_V, float('nan')):.2f}x" for b, p in pts.items()
                        if p)
        out.append({"target": f"online fused / safe unfused, K={kk}, V={PAPER_K_SWEEP_V}",
                    "need": f"paper (V100): {ref}x", "figure": fig or "-", "status": "info", "detail": ""})
    return out


TARGETS = {"softmax": targets_softmax, "backward": targets_backward, "topk": targets_topk,
           "paper": targets_paper, "paper-topk": targets_paper_topk}


def targets_md(tg) -> list:
    if not tg:
        return []
    lines = ["| target | need | reached | status | detail |", "|---|---|---|---|---|"]
    for t in tg:
        lines.append(f"| {t['target']} | {t['need']} | {t['figure']} | **{t['status']}** | {t['detail']} |")
    return lines


# ----------------------------------------------------------------------------
# Tables
# ----------------------------------------------------------------------------
class _Notes:
    """Footnotes for skipped / failed cells, numbered by (provider, reason)."""

    def __init__(self):
        self.items: OrderedDict = OrderedDict()

    def ref(self, r):
        key = (r["provider"], r["status"], r.get("note", ""))
        if key not in self.items:
            self.items[key] = len(self.items) + 1
        return f"{r['status']} [{self.items[key]}]"

    def md(self):
        return [f"[{i}] {p}: {s}: {n}" + "  " for (p, s, n), i in self.items.items()]


def _cell(r, notes, value):
    if r is None:
        return ""
    if r.get("status") != "ok" or "median_us" not in r:
        return notes.ref(r)
    v = value(r)
    return (v + ("~" if r.get("noisy") else "")
            + ("!" if r.get("check", "ok") not in ("ok", "not run") else ""))


def bandwidth_table(rows, op, peers, notes) -> list:
    """Per shape: each provider's TB/s, cusoftmax time, % of copy, speed-ups over peers."""
    rs = [r for r in rows if r["op"] == op]
    provs = _providers(rs)
    idx = _index(rs)
    sp_cols = [p for p in peers if p in provs]
    head = ["shape", "dtype", "MiB moved"] + [f"{p} TB/s" for p in provs]
    if "cusoftmax" in provs:
        head += ["cusoftmax us", "% of copy"] + [f"x {p}" for p in sp_cols]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key, by in idx.items():
        any_r = next(iter(by.values()))
        cells = [key[1], SHORT.get(key[2], key[2]), f"{any_r['bytes'] / MIB:.3g}"]
        cells += [_cell(by.get(p), notes, lambda r: f"{_tb(r):.3g}") for p in provs]
        if "cusoftmax" in provs:
            c = by.get("cusoftmax")
            ok = c is not None and c.get("status") == "ok" and "median_us" in c
            cells += [f"{c['median_us']:.3g}" if ok else "-", f"{c['fraction_of_copy']:.0%}" if ok else "-"]
            for p in sp_cols:
                o = by.get(p)
                good = ok and o is not None and o.get("status") == "ok" and "median_us" in o
                cells.append(f"{o['median_us'] / c['median_us']:.2f}" if good else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def host_table(rows) -> list:
    hs = [r for r in rows if r["op"].startswith("host:")]
    if not hs:
        return []
    lines = ["| op | provider | us per call (median of 5 x 2000 calls) | note |", "|---|---|---|---|"]
    for r in hs:
        v = f"{r['host_us']:.2f}" if r.get("status") == "ok" else r["status"]
        lines.append(f"| {r['op'][5:]} | {r['provider']} | {v} | {r.get('note', '')} |")
    return lines


def paper_table(rows, k=None, algos=None) -> list:
    algos = algos or [p for p in _providers(rows) if p.startswith("cusoftmax")]
    lines = []
    for b in sorted({r["rows"] for r in rows if "rows" in r}, reverse=True):
        data = {p: _by_v(rows, p, b, k) for p in algos}
        vs = sorted({v for d in data.values() for v in d})
        if not vs:
            continue
        lines += [f"**batch {b}**" + (f", K = {k}" if k else "") + " (elements/s, 1e9)", ""]
        head = ["V"] + algos
        num, den = ("cusoftmax-online", "cusoftmax-safe") if k is None else ("cusoftmax-online",
                                                                           "cusoftmax-unfused")
        if num in data and den in data:
            head.append(f"{num[10:]} / {den[10:]}")
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for v in vs:
            cells = [str(v)] + [_g(data[p][v]["elements_per_s"] / 1e9) if v in data[p] else "-" for p in algos]
            if len(head) > len(algos) + 1:
                a, s = data[num].get(v), data[den].get(v)
                cells.append(f"{s['median_us'] / a['median_us']:.2f}" if a and s else "-")
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return lines


def k_sweep_table(rows) -> list:
    from ._cases import PAPER_K_SWEEP_V
    sel = [r for r in rows if r.get("cols") == PAPER_K_SWEEP_V and r.get("k") is not None]
    ks = sorted({r["k"] for r in sel})
    batches = sorted({r["rows"] for r in sel}, reverse=True)
    if not ks:
        return []
    head = ["K"] + [f"batch {b}: online fused / safe unfused" for b in batches] + ["paper (V100)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for kk in ks:
        cells = [str(kk)]
        for b in batches:
            pts = dict(paper_ratios([r for r in sel if r["rows"] == b], k=kk, num="cusoftmax-online",
                                    den="cusoftmax-unfused").get(b, []))
            cells.append(f"{pts[PAPER_K_SWEEP_V]:.2f}x" if PAPER_K_SWEEP_V in pts else "-")
        ref = PAPER_TOPK_REF["k"].get(kk)
        cells.append(f"{ref}x" if ref else ("up to 5x (batch 4000)" if kk == 5 else ""))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


# ----------------------------------------------------------------------------
# Plots
# ----------------------------------------------------------------------------
def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


STYLE = {"cusoftmax": dict(color="C3", lw=2.2, marker="o"), "cusoftmax-online": dict(color="C1", marker="^"),
         "cusoftmax-safe": dict(color="C4", marker="v"), "cusoftmax-naive": dict(color="C5", marker="<"),
         "cusoftmax-unfused": dict(color="C6", marker=">"), "torch": dict(color="C0", marker="s"),
         "triton": dict(color="C2", marker="D"), "cupyx": dict(color="C7", marker="x"),
         "cupy": dict(color="C7", marker="x")}


def _style(p, **kw):
    s = dict(STYLE.get(p, {}), ms=3.5, lw=STYLE.get(p, {}).get("lw", 1.2))
    s.update(kw)
    return s


def _ceiling(ax, meta, ymax=None):
    """Draw the copy ceiling; when the data stay far below it (few rows), zoom in
    on the data and say where the ceiling is instead."""
    c = meta.get("ceiling_GBps")
    if not c:
        return
    c /= 1e3
    ax.axhline(c, color="k", ls="--", lw=1, label=f"copy ceiling {c:.2f} TB/s")
    if ymax is not None and ymax < 0.4 * c:
        ax.set_ylim(0, ymax * 1.15)
        ax.text(0.02, 0.95, f"copy ceiling {c:.2f} TB/s (off scale)", transform=ax.transAxes, fontsize=6,
                va="top")
    else:
        ax.set_ylim(0, c * 1.06)


def _finish(fig, axes, path, title):
    handles, labels = {}, {}
    for ax in axes:
        for h, l in zip(*ax.get_legend_handles_labels()):
            if l not in labels:
                labels[l], handles[l] = True, h
    ncol = max(1, min(len(handles), int(fig.get_figwidth() // 3.0)))
    leg_rows = -(-len(handles) // ncol)
    fig.legend(list(handles.values()), list(handles.keys()), loc="lower center", ncol=ncol,
               fontsize=8, frameon=False)
    fig.suptitle(title, fontsize=11)
    bottom = min(0.35, (0.2 * leg_rows + 0.1) / fig.get_figheight())
    fig.tight_layout(rect=(0, bottom, 1, 0.96))
    fig.savefig(path, dpi=110)
    _plt().close(fig)
    return path


def plot_bw_vs_cols(rows, meta, op, path, title):
    """Bandwidth against columns, one line per provider, one panel per (dtype, rows)."""
    g = [r for r in _ok(rows, op=op) if r.get("grid")]
    if not g:
        return None
    plt = _plt()
    dts = [d for d in DTYPE_ORDER if any(r["dtype"] == d for r in g)]
    nrows = sorted({r["rows"] for r in g})
    fig, axes = plt.subplots(len(dts), len(nrows), figsize=(3.3 * len(nrows), 2.7 * len(dts) + 0.6),
                             squeeze=False, sharex=True)
    used = []
    for i, dt in enumerate(dts):
        for j, n in enumerate(nrows):
            ax = axes[i][j]
            pts = [r for r in g if r["dtype"] == dt and r["rows"] == n]
            if not pts:
                ax.set_visible(False)
                continue
            used.append(ax)
            for p in _providers(pts):
                s = sorted((r["cols"], _tb(r)) for r in pts if r["provider"] == p)
                ax.plot([c for c, _ in s], [v for _, v in s], label=p, **_style(p))
            _ceiling(ax, meta, max(_tb(r) for r in pts))
            ax.set_xscale("log", base=2)
            ax.set_title(f"{SHORT[dt]}, {n} rows", fontsize=9)
            ax.grid(alpha=0.3)
            ax.tick_params(labelsize=7, labelbottom=True)
            if j == 0:
                ax.set_ylabel("TB/s (min. traffic)", fontsize=8)
            ax.set_xlabel("columns", fontsize=7)
    return _finish(fig, used, path, title)


def plot_topk(rows, meta, path):
    plt = _plt()
    ks = [r for r in _ok(rows, op="softmax_topk") if r["shape"] == [4096, 131072]]
    few = [r for r in _ok(rows, op="softmax_topk") if "few rows" in r.get("tags", [])]
    nrows = sorted({r["rows"] for r in few})
    fig, axes = plt.subplots(1, 1 + len(nrows), figsize=(3.6 * (1 + len(nrows)), 3.4), squeeze=False)
    axes = axes[0]
    if ks:
        for p in _providers(ks):
            s = sorted((r["k"], _tb(r)) for r in ks if r["provider"] == p)
            axes[0].plot([k for k, _ in s], [v for _, v in s], label=p, **_style(p))
        _ceiling(axes[0], meta, max(_tb(r) for r in ks))
        axes[0].set_xscale("log")
        axes[0].set_xlabel("k", fontsize=8)
        axes[0].set_title("4096 x 131072 f32", fontsize=9)
    for j, n in enumerate(nrows, start=1):
        ax = axes[j]
        pts = [r for r in few if r["rows"] == n]
        for p in _providers(pts):
            for kk, ls in ((5, "-"), (50, ":")):
                s = sorted((r["cols"], _tb(r)) for r in pts if r["provider"] == p and r["k"] == kk)
                if s:
                    ax.plot([c for c, _ in s], [v for _, v in s], ls=ls,
                            label=p if kk == 5 else None, **_style(p))
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"{n} rows (solid k=5, dotted k=50)", fontsize=9)
        ax.set_xlabel("columns", fontsize=8)
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=7)
    axes[0].set_ylabel("TB/s (one read of x)", fontsize=8)
    return _finish(fig, list(axes), path, f"softmax + top-k, {meta.get('device_name', '')}")


def _paper_axes(plt, n, ncols=3):
    nr = (n + ncols - 1) // ncols
    nc = min(n, ncols)
    fig, axes = plt.subplots(nr, nc, figsize=(4.4 * nc, 3.3 * nr + 0.5), squeeze=False)
    axes = [ax for row in axes for ax in row][:n]
    for ax in axes:
        ax.set_xscale("log")
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=7)
        ax.set_xlabel("vector size V", fontsize=8)
    return fig, axes


def plot_paper(rows, meta, path):
    plt = _plt()
    fig, axes = _paper_axes(plt, 3)
    algos = [p for p in _providers(rows) if p.startswith("cusoftmax")]
    for ax, b in zip(axes, (4000, 10)):
        for p in algos:
            d = _by_v(rows, p, b)
            vs = sorted(d)
            ax.plot(vs, [d[v]["elements_per_s"] / 1e9 for v in vs], label=p, **_style(p))
        ax.set_title(f"batch {b}", fontsize=9)
        ax.set_ylabel("elements/s (1e9)", fontsize=8)
    ax = axes[2]
    for (b, pts), c in zip(paper_ratios(rows).items(), ("C3", "C0")):
        if pts:
            ax.plot([v for v, _ in pts], [x for _, x in pts], color=c, marker="o", ms=3.5,
                    label=f"online / safe, batch {b} (this GPU)")
            ref = PAPER_REF.get(b)
            if ref:
                ax.hlines(ref, 4000, 1e6, colors=c, linestyles="--", lw=1,
                          label=f"paper V100, batch {b}: ~{ref}x (V >= 4000)")
    ax.axhline(1.0, color="k", lw=0.7)
    ax.set_title("online / safe speed-up", fontsize=9)
    return _finish(fig, list(axes), path, f"Milakov & Gimelshein Figs 1-2 on {meta.get('device_name', '')}")


def plot_paper_topk(rows, meta, path):
    from ._cases import PAPER_K_SWEEP_V, PAPER_TOPK_K
    plt = _plt()
    fig, axes = _paper_axes(plt, 4, ncols=2)
    algos = [p for p in _providers(rows) if p.startswith("cusoftmax")]
    for ax, b in zip(axes, (4000, 10)):
        for p in algos:
            d = _by_v(rows, p, b, PAPER_TOPK_K)
            vs = sorted(d)
            ax.plot(vs, [d[v]["elements_per_s"] / 1e9 for v in vs], label=p, **_style(p))
        ax.set_title(f"batch {b}, K = {PAPER_TOPK_K}", fontsize=9)
        ax.set_ylabel("elements/s (1e9)", fontsize=8)
    ax = axes[2]
    for (b, pts), c in zip(paper_ratios(rows, num="cusoftmax-online", den="cusoftmax-unfused",
                                        k=PAPER_TOPK_K).items(), ("C3", "C0")):
        if pts:
            ax.plot([v for v, _ in pts], [x for _, x in pts], color=c, marker="o", ms=3.5,
                    label=f"online fused / safe unfused, batch {b}")
    ax.plot([PAPER_K_SWEEP_V], [PAPER_TOPK_REF["batch4000_max"]], "C3*", ms=10,
            label="paper V100 batch 4000: up to 5x at V=25000")
    lo, hi = PAPER_TOPK_REF["batch10"]
    ax.axhspan(lo, hi, color="C0", alpha=0.12, label=f"paper V100 batch 10: {lo}-{hi}x")
    ax.axhline(1.0, color="k", lw=0.7)
    ax.set_title(f"speed-up, K = {PAPER_TOPK_K}", fontsize=9)
    ax = axes[3]
    sel = [r for r in rows if r.get("cols") == PAPER_K_SWEEP_V]
    for b, c in ((4000, "C3"), (10, "C0")):
        pts = []
        for kk in sorted({r["k"] for r in sel if r.get("k")}):
            d = dict(paper_ratios([r for r in sel if r["rows"] == b], num="cusoftmax-online",
                                  den="cusoftmax-unfused", k=kk).get(b, []))
            if PAPER_K_SWEEP_V in d:
                pts.append((kk, d[PAPER_K_SWEEP_V]))
        if pts:
            ax.plot([k for k, _ in pts], [x for _, x in pts], color=c, marker="o", ms=3.5,
                    label=f"K sweep, batch {b}, V={PAPER_K_SWEEP_V}")
    ref = PAPER_TOPK_REF["k"]
    ax.plot(list(ref), list(ref.values()), "k*", ms=9, label="paper V100: K=10/15/30")
    ax.axhline(1.0, color="k", lw=0.7)
    ax.set_xlabel("K", fontsize=8)
    ax.set_title("online fused / safe unfused vs K", fontsize=9)
    return _finish(fig, list(axes), path, f"Milakov & Gimelshein Figs 3-4 on {meta.get('device_name', '')}")


# ----------------------------------------------------------------------------
# Markdown per suite
# ----------------------------------------------------------------------------
def _header(data) -> list:
    m = data["meta"]
    cp = m.get("copy", {})
    lines = [f"# `python -m bench {data['suite']}` on {m.get('device_name', '?')}", "",
             f"- device: {m.get('device_name')} (sm_{m.get('compute_capability')}, {m.get('sm_count')} SMs, "
             f"L2 {m.get('l2_bytes', 0) / MIB:.0f} MiB), driver CUDA {m.get('driver_cuda')}, "
             f"runtime {m.get('runtime_cuda')}",
             f"- versions: cusoftmax {m.get('cusoftmax')} (commit {m.get('cusoftmax_commit') or 'unknown'}), "
             f"cupy {m.get('cupy')}, "
             f"torch {m.get('torch')}, triton {m.get('triton')}, numpy {m.get('numpy')}, python {m.get('python')}",
             f"- date (UTC): {m.get('date_utc')}; command: `{m.get('command', '')}`",
             f"- copy ceiling (1 GiB device-to-device memcpy, read + write): **{m.get('ceiling_GBps', 0) / 1e3:.3f} TB/s**"
             + "".join(f"; {k} {v['GBps'] / 1e3:.3f} TB/s" for k, v in cp.items() if k != "memcpy_d2d"),
             f"- timing: CUDA events, median of >= {m.get('reps_min')} reps (more for short calls), L2 flushed "
             f"({m.get('flush_bytes', 0) / MIB:.0f} MiB memset) before every rep; bandwidth = minimum traffic / "
             "median time" + (" — **--quick run: few shapes and reps, not for reporting**" if m.get("quick") else ""),
             ]
    if m.get("reps_min", 50) < 50:
        lines.append(f"- **fewer than 50 reps per case ({m.get('reps_min')}): not a reportable result**")
    if m.get("synthetic"):
        lines.append("- **SYNTHETIC DATA (self-test of the report path): these numbers are fabricated**")
    if m.get("suite_seconds") is not None:
        fc = m.get("first_call_seconds") or {}
        lines.append(f"- run time: {m['suite_seconds']:.0f} s" + (
            "; first calls (compiles) by provider: " + ", ".join(f"{k} {v:.0f} s" for k, v in fc.items())
            if fc else ""))
    for n in m.get("notes", []):
        lines.append(f"- note: {n}")
    return lines + [""]


def render(out_dir, data, plots=True) -> list:
    """Write ``<suite>.md`` and the plots from a suite's data; returns the paths."""
    suite, rows, meta = data["suite"], data["rows"], data["meta"]
    d = suite_dir(out_dir, suite)
    os.makedirs(d, exist_ok=True)
    paths = []
    lines = _header(data)
    if data.get("skipped"):
        lines += [f"**Suite skipped:** {data['skipped']}", ""]
    tg = TARGETS.get(suite, lambda r, m: [])(rows, meta) if rows else []
    if tg:
        lines += ["## Targets" if suite not in ("paper", "paper-topk") else "## Against the paper (V100)", ""]
        lines += targets_md(tg) + [""]
    pngs = []
    if plots and rows:
        if suite in ("softmax", "backward"):
            for op in sorted({r["op"] for r in rows if not r["op"].startswith("host:")}):
                p = plot_bw_vs_cols(rows, meta, op, os.path.join(d, f"{op}_bw.png"),
                                    f"{op}: bandwidth vs columns, {meta.get('device_name', '')}")
                pngs.append(p)
        elif suite == "topk":
            pngs.append(plot_topk(rows, meta, os.path.join(d, "topk.png")))
        elif suite == "paper":
            pngs.append(plot_paper(rows, meta, os.path.join(d, "paper.png")))
        elif suite == "paper-topk":
            pngs.append(plot_paper_topk(rows, meta, os.path.join(d, "paper_topk.png")))
    pngs = [p for p in pngs if p]
    if pngs:
        lines += ["## Plots", ""] + [f"![{os.path.basename(p)}]({os.path.basename(p)})" for p in pngs] + [""]
    paths += pngs
    notes = _Notes()
    if suite in ("softmax", "backward", "topk"):
        peers = {"softmax": ("torch", "cupyx", "triton"), "backward": ("torch",),
                 "topk": ("torch", "cupy")}[suite]
        for op in [o for o in dict.fromkeys(r["op"] for r in rows) if not o.startswith("host:")]:
            lines += [f"## {op}: TB/s of minimum traffic; x peer = peer time / cusoftmax time", ""]
            lines += bandwidth_table(rows, op, peers, notes) + [""]
        h = host_table(rows)
        if h:
            lines += ["## Host time per call (4x4 float32, warm, no synchronisation)", ""] + h + [""]
    elif suite == "paper":
        lines += ["## Figures 1-2: elements per second", ""] + paper_table(rows)
    elif suite == "paper-topk":
        from ._cases import PAPER_TOPK_K
        lines += ["## Figures 3-4: elements per second", ""] + paper_table(rows, k=PAPER_TOPK_K)
        lines += ["## K sweep (V = 25000)", ""] + k_sweep_table(rows) + [""]
    elif suite == "copy":
        lines += ["| copy | GB/s | us | bytes counted |", "|---|---|---|---|"]
        lines += [f"| {k} | {v['GBps']:.0f} | {v['median_us']:.1f} | {v['bytes']} |" for k, v in
                  meta.get("copy", {}).items()] + [""]
    mism = [r for r in rows if r.get("check", "ok") not in ("ok", "not run")]
    if mism:
        lines += ["## Correctness mismatches (against cusoftmax.reference, sampled rows)", ""]
        lines += [f"- {r['provider']} {r['op']} {r['label']} {r['dtype']}: {r['check']}" for r in mism] + [""]
    if notes.items:
        lines += ["## Skipped / failed cells", ""] + notes.md() + [""]
    noisy = [r for r in rows if r.get("noisy")]
    if noisy:
        lines += [f"{len(noisy)} of {len(_ok(rows))} timings stayed noisy after re-timing "
                  f"((p90 - p10) / median > {NOISE:.0%}; marked `~`): "
                  + ", ".join(f"{r['provider']} {r['op']} {r['label']} {SHORT.get(r['dtype'], r['dtype'])} "
                              f"({r['spread']:.0%})" for r in sorted(noisy, key=lambda r: -r["spread"])[:15])
                  + (" ..." if len(noisy) > 15 else ""), ""]
    lines += ["`!` after a figure: that provider's output failed the reference check on this shape. "
              "`~`: a noisy timing (see above).", ""]
    mp = os.path.join(d, f"{suite}.md")
    with open(mp, "w") as f:
        f.write("\n".join(lines))
    return [mp] + paths


def write_summary(out_dir) -> str:
    """``SUMMARY.md``: the targets of every suite whose JSON is in ``out_dir``."""
    lines = ["# Benchmark summary", ""]
    first = True
    from ._suites import ALL
    found = glob.glob(os.path.join(out_dir, "*", "*.json"))
    rank = {s: i for i, s in enumerate(ALL)}
    for jp in sorted(found, key=lambda p: (rank.get(os.path.basename(p)[:-5], len(rank)), p)):
        with open(jp) as f:
            data = json.load(f)
        if not (isinstance(data, dict) and "suite" in data and "meta" in data):
            continue  # another tool's JSON (e.g. kernels/tune*.json)
        suite, m = data["suite"], data["meta"]
        if first:
            lines += [f"Device: {m.get('device_name')}; copy ceiling {m.get('ceiling_GBps', 0) / 1e3:.3f} TB/s "
                      f"(measured in each run).", ""]
            first = False
        lines += [f"## [{suite}]({suite}/{suite}.md) — {m.get('date_utc')}"
                  + (" (--quick)" if m.get("quick") else "") + (" SYNTHETIC" if m.get("synthetic") else ""), ""]
        if data.get("skipped"):
            lines += [f"skipped: {data['skipped']}", ""]
            continue
        tg = TARGETS.get(suite, lambda r, mm: [])(data["rows"], m)
        lines += targets_md(tg) if tg else [f"copy ceiling {m.get('ceiling_GBps', 0) / 1e3:.3f} TB/s"]
        lines.append("")
    p = os.path.join(out_dir, "SUMMARY.md")
    with open(p, "w") as f:
        f.write("\n".join(lines))
    return p
