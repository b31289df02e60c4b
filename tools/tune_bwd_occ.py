"""Backward rows at full occupancy (torch's layout: one row per block, four
512-thread blocks an SM) against the dispatched plans, log-softmax first.

ncu (tools/diag_torch_gap.py) showed torch's cunn_SoftMaxBackwardSmem on
bfloat16 512 x 16384 at 16.8 us with 512 blocks of 512 threads, 29 registers
and 87% of the warps resident, where softmax_backward_smem (2 stages, y
preloaded) took 27.5 us at 91 registers: one 512-thread block an SM, 25%.
Candidates, each checked against the float64 reference on two rows first:
  smem sS tT bB      softmax_backward_smem with S stages, T threads, launch
             bounds for B blocks an SM; S = 1: one row a block (grid = rows),
             S = 2: persistent, B blocks an SM
  stream uU tT       softmax_backward_stream, U packs in flight
  block tT bB        softmax_backward_block, launch bounds for B blocks an SM
CUDA events, median of 30, L2 flushed before every repetition (tools/tune.py).
kernels/tune_bwd_occ.txt was measured on a draft of this tool (168f125 plus
the raw-pack loads) whose kernels also took a y-preload count (smem "yY"),
launch bounds for the stream ("bB") and y loaded with dy in the block kernel
("ye"); none of them was kept.

    PYTHONPATH=.:tools python tools/tune_bwd_occ.py [--shapes RxL,...] [--dtypes ...] [--softmax]
"""
import argparse
import json

from cusoftmax import _dispatch as D


def candidates(R, L, dt, dev, log):
    T = D.CTYPE[dt]
    LG = "true" if log else "false"
    pack = D.bwd_pack_width(dt, dt, dt)
    packs = -(-L // pack)
    head = f"{T}, {T}, {T}, {LG}, {pack}"
    sms = dev.sm_count
    plan = D.plan_backward_rows(R, L, dt, dt, dt, log, dev)
    out = [("dispatch", plan)]
    row_bytes = packs * 16 * (1 if log else 2)
    for st in (1, 2):
        for th, b in ((512, 4), (512, 3), (256, 8), (512, 2), (1024, 1)):
            if b * st * row_bytes + b * 1024 > 227 * 1024:
                continue
            grid = R if st == 1 else min(R, sms * b)
            out.append((f"smem s{st} t{th} b{b}", D.LaunchPlan(
                "smem", D.BWD_SOURCE, f"softmax_backward_smem<{head}, {th}, {st}, {b}>",
                (grid,), (th,), pack, extra=(packs,), smem=st * row_bytes)))
    if packs >= 2048:
        for th, u in ((1024, 2), (512, 2), (1024, 1)):
            out.append((f"stream u{u} t{th}", D.LaunchPlan(
                "stream", D.BWD_SOURCE, f"softmax_backward_stream<{head}, {u}, {th}, true>",
                (min(R, sms * D.MAX_BLOCKS_PER_SM),), (th,), pack)))
    if plan.regime == "block" or packs <= 1024:
        np_max = D.bwd_reg_elems(dt, dt, dt) // pack
        for th in (256, 512, 1024):
            np_ = D._ladder(-(-packs // th))
            if np_ > np_max:
                continue
            for b in sorted({1, 2048 // th}):
                out.append((f"block t{th} b{b}", D.LaunchPlan(
                    "block", D.BWD_SOURCE, f"softmax_backward_block<{head}, {np_}, {th}, {b}>",
                    (R,), (th,), pack)))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--dtypes", default="bfloat16,float32")
    ap.add_argument("--shapes", default="512x4096,512x8192,512x16384,4096x4096,4096x8192,4096x16384,"
                                        "512x32768,4096x32768,512x65536,512x131072,4096x131072")
    ap.add_argument("--softmax", action="store_true", help="softmax_backward too")
    a = ap.parse_args()
    from cusoftmax._launch import device_info
    from tune_cstream import run_bwd
    dev = device_info(0)
    shapes = [tuple(int(v) for v in t.split("x")) for t in a.shapes.split(",")]
    res = []
    run_bwd(shapes, a.dtypes.split(","), dev, res, (False, True) if a.softmax else (True,), candidates)
    if a.json:
        json.dump(res, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
