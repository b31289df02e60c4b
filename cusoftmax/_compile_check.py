"""Compile kernels with NVRTC for a given architecture, no GPU needed.

Used by the test-suite (and ``python -m cusoftmax.compile_check``) to build
every instantiation the dispatcher can choose, for sm_80 and sm_90, and to
fail on any compile error or register spill reported by ``-Xptxas -v``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ._loader import COMPILE_OPTIONS, expanded_source

_FUNC_RE = re.compile(r"Compiling entry function '(\S+)' for '(\w+)'")
# ptxas reports every function's frame and spills after "Function properties
# for <name>", entry or not (a non-inlined device function's come after the
# entry's own), so they are attributed by that name.
_PROPS_RE = re.compile(r"Function properties for (\S+)")
_SPILL_RE = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_REG_RE = re.compile(r"Used (\d+) registers")


@dataclass
class KernelReport:
    name: str
    lowered: str
    registers: int
    stack: int
    spill_stores: int
    spill_loads: int


def parse_ptxas_log(log: str) -> dict:
    """``{lowered name: [registers, stack, spill stores, spill loads]}`` from
    an ``-Xptxas -v`` log, for entry and non-entry functions alike."""
    stats = {}
    cur = None
    for line in log.splitlines():
        m = _FUNC_RE.search(line)
        if m:
            cur = m.group(1)
            stats[cur] = [0, 0, 0, 0]
            continue
        m = _PROPS_RE.search(line)
        if m:
            cur = m.group(1)
            stats.setdefault(cur, [0, 0, 0, 0])
            continue
        if cur is None:
            continue
        m = _SPILL_RE.search(line)
        if m:
            stats[cur][1:4] = [int(m.group(1)), int(m.group(2)), int(m.group(3))]
        m = _REG_RE.search(line)
        if m:
            stats[cur][0] = int(m.group(1))
    return stats


def compile_batch(source: str, names: list[str], arch: str) -> list[KernelReport]:
    """Compile ``names`` (name expressions) of ``kernels/<source>`` to a cubin
    for ``arch`` (e.g. ``"sm_90"``) in one NVRTC program; return one report per
    kernel. Raises ``RuntimeError`` with the compiler log on failure, or
    when a non-inlined device function spills (its report names no kernel)."""
    from cupy_backends.cuda.libs import nvrtc

    src = expanded_source(source)
    prog = nvrtc.createProgram(src, source, [], [])
    try:
        for n in names:
            nvrtc.addNameExpression(prog, n)
        opts = list(COMPILE_OPTIONS) + [f"-arch={arch}", "-Xptxas=-v", "-ftz=true"]
        try:
            nvrtc.compileProgram(prog, opts)
        except Exception as e:
            raise RuntimeError(f"NVRTC failed for {source} ({arch}): {e}\n{nvrtc.getProgramLog(prog)}")
        log = nvrtc.getProgramLog(prog)
        lowered = {n: nvrtc.getLoweredName(prog, n) for n in names}
    finally:
        nvrtc.destroyProgram(prog)
    stats = parse_ptxas_log(log)
    entries = set(lowered.values())
    spilling = [f for f, st in stats.items() if f not in entries and (st[2] or st[3])]
    if spilling:  # a non-inlined device function: no kernel report carries it
        raise RuntimeError(f"device functions spill registers ({arch}): " + "; ".join(
            f"{f}: {stats[f][2]} B stores, {stats[f][3]} B loads" for f in spilling))
    out = []
    for n in names:
        s = stats.get(lowered[n])
        if s is None:
            raise RuntimeError(f"no ptxas report for {n} ({lowered[n]}) on {arch}")
        out.append(KernelReport(n, lowered[n], *s))
    return out
