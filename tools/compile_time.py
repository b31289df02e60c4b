"""Cold-start cost of each public operation: the first call in a fresh
process with an empty CuPy kernel cache (NVRTC compile + module load), then
the first call in another fresh process with that cache populated (load from
disk only), and a warm call. One subprocess per measurement.

    python tools/compile_time.py            # prints a markdown table
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import json, sys, time
import cupy, cusoftmax
op, shape = sys.argv[1], tuple(json.loads(sys.argv[2]))
x = cupy.random.standard_normal(shape, dtype=cupy.float32)
cupy.cuda.runtime.deviceSynchronize()
if op in ("softmax", "log_softmax"):
    f = lambda: getattr(cusoftmax, op)(x)
elif op.endswith("_backward"):
    y = cusoftmax.softmax(x) if op == "softmax_backward" else cusoftmax.log_softmax(x)
    f = lambda: getattr(cusoftmax, op)(y, x)  # the forward compiled above, untimed
else:
    f = lambda: cusoftmax.softmax_topk(x, 50)
cupy.cuda.runtime.deviceSynchronize()
t = time.perf_counter(); f(); cupy.cuda.runtime.deviceSynchronize(); first = time.perf_counter() - t
t = time.perf_counter(); f(); cupy.cuda.runtime.deviceSynchronize(); warm = time.perf_counter() - t
print(json.dumps({"first_s": first, "warm_s": warm}))
"""

OPS = [("softmax", (4096, 1024)), ("log_softmax", (4096, 1024)), ("softmax", (1, 128256)),
       ("softmax_backward", (4096, 1024)), ("log_softmax_backward", (4096, 1024)),
       ("softmax_topk", (4096, 32000))]


def run(op, shape, cache):
    env = dict(os.environ, CUPY_CACHE_DIR=cache, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", CHILD, op, json.dumps(shape)], env=env, capture_output=True,
                       text=True, timeout=600)
    if r.returncode:
        raise RuntimeError(r.stderr[-2000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    import cupy
    name = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"cold-start cost per operation on {name} (float32; seconds of wall time, synchronised)\n")
    print("| operation | shape | first call, empty kernel cache | first call, kernel cache on disk | warm call |")
    print("|---|---|---|---|---|")
    for op, shape in OPS:
        with tempfile.TemporaryDirectory() as cache:
            cold = run(op, shape, cache)
            disk = run(op, shape, cache)
        print(f"| {op} | {shape} | {cold['first_s']:.2f} s | {disk['first_s'] * 1e3:.0f} ms | "
              f"{cold['warm_s'] * 1e6:.0f} us |", flush=True)


if __name__ == "__main__":
    main()
