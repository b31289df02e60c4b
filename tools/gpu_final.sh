#!/usr/bin/env bash
# One device call: the GPU test suite, the self-check and the host-time
# profile, logs under $OUT. Usage (repo root, on the GPU machine):
#   OUT=/tmp/out T_TEST=330 bash tools/gpu_final.sh
set -u
OUT=${OUT:-/tmp/cusoftmax-out}
mkdir -p "$OUT"
export PYTHONPATH=.:tests PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/device.txt"
# the suite: everything but the CPU-only compile check and wheel build (CI runs those)
timeout "${T_TEST:-330}" python3 -m pytest tests -q -p no:cacheprovider -rfE --timeout=120 \
  --ignore=tests/test_compile.py --ignore=tests/test_packaging.py \
  --hypothesis-show-statistics > "$OUT/pytest.log" 2>&1
echo "pytest exit status: $?" >> "$OUT/pytest.log"
grep -E "passed|failed|error" "$OUT/pytest.log" | tail -3
grep -E "^FAILED|^ERROR" "$OUT/pytest.log" | head -20
timeout 150 python3 -m cusoftmax > "$OUT/selfcheck.txt" 2>&1; tail -25 "$OUT/selfcheck.txt"
timeout 60 python3 tools/hostprof.py > "$OUT/hostprof.txt" 2>&1; tail -20 "$OUT/hostprof.txt"
