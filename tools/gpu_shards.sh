#!/usr/bin/env bash
# One device call: the whole GPU test suite at full hypothesis scale, as many
# pytest processes side by side (kernel compiles are CPU-bound and the GPU
# machine has 16 cores), then the self-check. Usage (repo root, on the GPU
# machine):
#   OUT=/tmp/out T_TEST=300 bash tools/gpu_shards.sh
# The suite's GPU tests in four parts: the strided ("cols") tests of
# test_softmax_gpu.py; the rest of test_softmax_gpu.py; top-k and backward;
# everything else but the CPU-only compile check and wheel build (CI runs
# those). The first three are collected and their node ids dealt round-robin
# to SPLIT processes each (default 4); the last runs a process per file group.
# On an H100 the whole took 111-128 s of wall time this way (743d831), against
# 486 s with one process a part. Writes under $OUT only a few files (the
# device tool returns a limited number): device.txt, summary.txt (a line a
# process, then the totals), shards.log (every process's log), selfcheck.txt.
# Exit status 0 only if every process passed and each part collected tests.
set -u
OUT=${OUT:-/tmp/cusoftmax-out}
mkdir -p "$OUT"
export PYTHONPATH=.:tests PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/device.txt"
T=${T_TEST:-300}
SPLIT=${SPLIT:-4}
W=$(mktemp -d)
t0=$(date +%s)
TO=()  # a per-test limit where pytest-timeout is installed (the GPU machine has it)
python3 -c "import pytest_timeout" 2>/dev/null && TO=(--timeout=280)
run() {  # run NAME pytest-args...
  local name=$1; shift
  ( timeout "$T" python3 -m pytest -q -p no:cacheprovider -rfE "${TO[@]}" \
      --hypothesis-show-statistics "$@" > "$W/pytest-$name.log" 2>&1
    echo "pytest exit status: $?" >> "$W/pytest-$name.log" ) &
}
ok=1
deal() {  # deal NAME pytest-selection...: collect, then SPLIT processes over the node ids
  local name=$1; shift
  python3 -m pytest --collect-only -q -p no:cacheprovider "$@" 2>/dev/null | grep "::" > "$W/$name.ids"
  local n; n=$(wc -l < "$W/$name.ids")
  echo "$name: $n tests collected" >> "$W/collected.txt"
  if [ "$n" -eq 0 ]; then ok=0; return; fi
  awk -v k="$SPLIT" -v p="$W/$name" '{print > (p "-" (NR % k) ".part")}' "$W/$name.ids"
  for f in "$W/$name"-*.part; do
    local ids; readarray -t ids < "$f"
    run "$name-$(basename "$f" .part | sed 's/.*-//')" "${ids[@]}"
  done
}
deal cols tests/test_softmax_gpu.py -k cols
deal softmax tests/test_softmax_gpu.py -k "not cols"
deal topk-bwd tests/test_topk.py tests/test_backward.py
run other-robust-gpu tests/test_robust_gpu.py
run other-nan tests/test_nan_rows.py
run other-cpu tests/test_robust_cpu.py tests/test_dispatch_cpu.py
run other-rest tests --ignore=tests/test_compile.py --ignore=tests/test_packaging.py \
  --ignore=tests/test_softmax_gpu.py --ignore=tests/test_topk.py --ignore=tests/test_backward.py \
  --ignore=tests/test_robust_gpu.py --ignore=tests/test_nan_rows.py --ignore=tests/test_robust_cpu.py \
  --ignore=tests/test_dispatch_cpu.py
wait
for f in "$W"/pytest-*.log; do echo "== $(basename "$f")"; cat "$f"; done > "$OUT/shards.log"
{
  cat "$W/collected.txt"
  for f in "$W"/pytest-*.log; do
    echo "$(basename "$f"): $(grep -E '(passed|failed|error|skipped).* in [0-9.]+s' "$f" | tail -1) | $(tail -1 "$f")"
    grep -E "^FAILED|^ERROR" "$f" | head -10
    tail -1 "$f" | grep -q "status: 0$" || ok=0
  done
  python3 - "$OUT/shards.log" <<'EOF'
import re, sys
t = open(sys.argv[1]).read()
tot = {k: sum(int(n) for n in re.findall(r"(\d+) " + k, " ".join(re.findall(r"^\S.* in [0-9.]+s.*$", t, re.M))))
       for k in ("passed", "skipped", "failed", "error")}
ex = [(int(a), int(b)) for a, b in re.findall(r"- (\d+) passing, (\d+) failing", t)]
print(f"totals: {tot['passed']} passed, {tot['skipped']} skipped, {tot['failed']} failed, {tot['error']} errors; "
      f"{sum(a for a, _ in ex)} hypothesis examples over {len(ex)} property tests, {sum(b for _, b in ex)} failing")
EOF
  echo "wall $(( $(date +%s) - t0 )) s"
} > "$OUT/summary.txt"
[ $ok -eq 1 ] || echo "SOME PART FAILED OR COLLECTED NOTHING" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
timeout 120 python3 -m cusoftmax > "$OUT/selfcheck.txt" 2>&1; tail -25 "$OUT/selfcheck.txt"
rm -rf "$W"
[ $ok -eq 1 ]
