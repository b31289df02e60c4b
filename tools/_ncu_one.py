import sys
sys.path[:0] = [".", "tools", "tests"]
import cupy as cp
from csm_try import launch
x = cp.random.RandomState(1).standard_normal((1, 32768), dtype=cp.float32)
run, v, i = launch(x, int(sys.argv[1]), 8)
for _ in range(3):
    run()
cp.cuda.runtime.deviceSynchronize()
