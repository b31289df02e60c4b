"""Where the time of softmax_topk goes for large k on many long rows
(4096 x 131072 float32): the public call on rows of different orders
(random normal; sorted descending: only the first batch has candidates;
sorted ascending: every element is one), against k = 1 (pure streaming).
CUDA events, L2 flushed, median of 10. Usage: python tools/prof_topk_large.py"""
import sys
import cupy as cp
import cusoftmax as cs
from tune import timeit

R, L = (int(a) for a in (sys.argv[1:3] or (4096, 131072)))
rs = cp.random.RandomState(1)
x = rs.standard_normal((R, L), dtype=cp.float32)
data = {"normal": x, "descending": -cp.sort(x, axis=1), "ascending": cp.sort(x, axis=1)}
gb = R * L * 4 / 1e9
for k in (1, 50, 256, 1024):
    line = [f"k={k:5d}"]
    for name, a in data.items():
        t = timeit(lambda: cs.softmax_topk(a, k), reps=10)
        line.append(f"{name} {t:9.1f} us ({gb / t * 1e6 / 1e3:5.2f} TB/s)")
    print(" | ".join(line), flush=True)
