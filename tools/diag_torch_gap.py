"""Where torch is ahead: flushed-event times of cusoftmax and torch on the
shapes where the committed benches have torch ahead, then one call of each
under ncu (run with `ncu --profile-from-start off`): grid, block, registers,
DRAM bytes and duration of every kernel each call launches.

    python3 tools/diag_torch_gap.py [--only=op:RxL,...]   # event times
    ncu --profile-from-start off --csv --metrics ... python3 tools/diag_torch_gap.py --ncu
"""
import sys
import cupy as cp
import torch
import cusoftmax as cs
sys.path.insert(0, "tools")
from tune import timeit

CASES = [  # (op, rows, cols, dtype)
    ("log_bwd", 1, 128, "float32"), ("bwd", 1, 128, "float32"), ("log_fwd", 1, 128, "float32"),
    ("log_bwd", 512, 128, "float32"), ("log_bwd", 4096, 128, "float32"),
    ("log_bwd", 262144, 128, "float32"), ("fwd", 262144, 128, "float32"),
    ("log_fwd", 32768, 1024, "float32"), ("log_bwd", 8, 512, "float32"),
    ("log_bwd", 512, 8192, "bfloat16"), ("log_bwd", 512, 16384, "bfloat16"),
    ("log_fwd", 4096, 16384, "bfloat16"), ("log_fwd", 512, 32768, "bfloat16"),
    ("log_bwd", 512, 131072, "bfloat16"),
]
TDT = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def calls(op, R, L, dt):
    t = torch.randn(R, L, device="cuda", dtype=TDT[dt])
    y = torch.log_softmax(t.float(), -1).to(TDT[dt]) if op.startswith("log") else torch.softmax(t.float(), -1).to(TDT[dt])
    dy = torch.randn(R, L, device="cuda", dtype=TDT[dt])
    cx, cy, cdy = (cp.from_dlpack(a) for a in (t, y, dy))
    if op == "log_bwd":
        return (lambda: cs.log_softmax_backward(cy, cdy)), (lambda: torch._log_softmax_backward_data(dy, y, -1, y.dtype))
    if op == "bwd":
        return (lambda: cs.softmax_backward(cy, cdy)), (lambda: torch._softmax_backward_data(dy, y, -1, y.dtype))
    if op == "log_fwd":
        return (lambda: cs.log_softmax(cx)), (lambda: torch.log_softmax(t, -1))
    return (lambda: cs.softmax(cx)), (lambda: torch.softmax(t, -1))


ncu = "--ncu" in sys.argv
only = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--only=")]  # e.g. --only=log_bwd:512x16384
for op, R, L, dt in CASES:
    if only and f"{op}:{R}x{L}" not in only[0].split(","):
        continue
    ours, theirs = calls(op, R, L, dt)
    ours(); theirs(); cp.cuda.runtime.deviceSynchronize(); torch.cuda.synchronize()
    if ncu:
        for name, f in (("ours", ours), ("torch", theirs)):
            print(f"NCU {op} {R}x{L} {dt} {name}", flush=True)
            cp.cuda.runtime.deviceSynchronize()
            cp.cuda.profiler.start(); f(); cp.cuda.runtime.deviceSynchronize(); cp.cuda.profiler.stop()
    else:
        a = timeit(ours, 100); b = timeit(theirs, 100)
        print(f"{op:8s} {R:>6d}x{L:<7d} {dt:9s} ours {a:8.2f} us  torch {b:8.2f} us  ratio {b / a:5.3f}", flush=True)
