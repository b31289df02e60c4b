#!/usr/bin/env bash
# One device call: the whole GPU test suite at full hypothesis scale, in four
# shards run side by side (kernel compiles are CPU-bound and the GPU machine
# has 16 cores), then the self-check. Logs under $OUT. Usage (repo root, on the
# GPU machine):
#   OUT=/tmp/out T_TEST=540 bash tools/gpu_shards.sh
# The shards partition the suite's GPU tests: the strided ("cols") tests of
# test_softmax_gpu.py; the rest of test_softmax_gpu.py; top-k and backward;
# everything else but the CPU-only compile check and wheel build (CI runs those).
set -u
OUT=${OUT:-/tmp/cusoftmax-out}
mkdir -p "$OUT"
export PYTHONPATH=.:tests PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/device.txt"
T=${T_TEST:-540}
run() {  # run NAME pytest-args...
  local name=$1; shift
  ( timeout "$T" python3 -m pytest -q -p no:cacheprovider -rfE --timeout=300 \
      --hypothesis-show-statistics "$@" > "$OUT/pytest-$name.log" 2>&1
    echo "pytest exit status: $?" >> "$OUT/pytest-$name.log" ) &
}
run cols tests/test_softmax_gpu.py -k cols
run softmax tests/test_softmax_gpu.py -k "not cols"
run topk-bwd tests/test_topk.py tests/test_backward.py
run other tests --ignore=tests/test_compile.py --ignore=tests/test_packaging.py \
  --ignore=tests/test_softmax_gpu.py --ignore=tests/test_topk.py --ignore=tests/test_backward.py
wait
for f in "$OUT"/pytest-*.log; do
  echo "$(basename "$f"): $(grep -E '(passed|failed|error).* in [0-9.]+s' "$f" | tail -1) | $(tail -1 "$f")"
  grep -E "^FAILED|^ERROR" "$f" | head -10
done | tee "$OUT/summary.txt"
timeout 120 python3 -m cusoftmax > "$OUT/selfcheck.txt" 2>&1; tail -25 "$OUT/selfcheck.txt"
