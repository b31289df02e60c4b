"""Forward rows staged one per block at full occupancy (torch's
cunn_SoftMaxForwardSmem layout: grid = rows, several blocks an SM) against
the dispatched plans: softmax_smem with one stage, grid = rows, T threads and
launch bounds for B blocks an SM ("smem1 tT bB"), beside the dispatched plan.
Each candidate is checked against the float64 reference on two rows first;
CUDA events, median of 30, L2 flushed before every repetition.

    PYTHONPATH=.:tools python tools/tune_fwd_occ.py [--shapes RxL,...] [--dtypes ...]
"""
import argparse
import json

from cusoftmax import _dispatch as D


def candidates(R, L, dt, dev, log):
    T = D.CTYPE[dt]
    LG = "true" if log else "false"
    pack = D.pack_width(dt, dt)
    packs = -(-L // pack)
    out = [("dispatch", D.plan_rows(R, L, dt, dt, log, dev))]
    row = packs * 16
    for th, b in ((256, 8), (512, 4), (512, 3), (512, 2), (1024, 2), (1024, 1)):
        if b * (row + 1024) > 227 * 1024:
            continue
        out.append((f"smem1 t{th} b{b}", D.LaunchPlan(
            "smem", "softmax.cu",
            f"softmax_smem<{T}, {T}, {LG}, {pack}, {th}, 1, 1, {b}>", (R,), (th,), pack,
            extra=(packs,), smem=row)))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--dtypes", default="bfloat16,float32")
    ap.add_argument("--shapes", default="4096x4096,4096x8192,4096x16384,512x16384,512x32768,4096x32768,"
                                        "32768x1024,4096x2048")
    a = ap.parse_args()
    import tune_sync_bwd as S
    from cusoftmax._launch import device_info
    S.fwd_candidates = candidates
    res = []
    S.run_fwd([tuple(int(v) for v in t.split("x")) for t in a.shapes.split(",")], a.dtypes.split(","),
              device_info(0), res)
    if a.json:
        json.dump(res, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
