#!/usr/bin/env bash
# Run compute-sanitizer's memcheck, racecheck and synccheck over
# tools/sanitize_sample.py (every regime of every operation, small shapes,
# results checked) and print each tool's summary line.
#
#   tools/sanitize.sh                 # needs a GPU and compute-sanitizer
#   LOG_DIR=/tmp/logs SANITIZE_TIMEOUT=600 tools/sanitize.sh   # logs, per-tool time limit (s)
#
# Exit status: 0 if every tool reports 0 errors and the sample's results are
# right; 1 otherwise; 2 if compute-sanitizer is missing.
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
LOG_DIR=${LOG_DIR:-${TMPDIR:-/tmp}/cusoftmax-sanitize}
mkdir -p "$LOG_DIR"
CS=${COMPUTE_SANITIZER:-}
if [ -z "$CS" ]; then
  for c in compute-sanitizer /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer \
           /opt/nvidia/compute-sanitizer/compute-sanitizer; do
    if command -v "$c" >/dev/null 2>&1; then CS=$(command -v "$c"); break; fi
  done
fi
if [ -z "$CS" ]; then
  CS=$(ls -d /usr/local/cuda*/bin/compute-sanitizer /opt/nvidia/*/compute-sanitizer 2>/dev/null | head -1)
fi
if [ -z "$CS" ]; then
  echo "compute-sanitizer not found (set COMPUTE_SANITIZER=/path/to/compute-sanitizer)"
  exit 2
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# warm the kernel cache outside the sanitizer (compiles are host work)
"$PY" tools/sanitize_sample.py > "$LOG_DIR/warm.log" 2>&1 || { echo "sample failed without the sanitizer:"; tail -20 "$LOG_DIR/warm.log"; exit 1; }
status=0
for tool in memcheck racecheck synccheck; do
  log="$LOG_DIR/$tool.log"
  extra=()
  [ "$tool" = racecheck ] && extra=(--racecheck-report all)
  timeout "${SANITIZE_TIMEOUT:-900}" "$CS" --tool "$tool" "${extra[@]}" --error-exitcode 99 --print-limit 20 \
        "$PY" tools/sanitize_sample.py > "$log" 2>&1
  rc=$?
  summary=$(grep -E "(ERROR|RACECHECK) SUMMARY" "$log" | tail -1 | sed 's/^=* *//')
  sample=$(grep -E "^sanitize sample:" "$log" | tail -1)
  echo "$tool: ${summary:-no summary line} | ${sample:-sample did not finish} | exit $rc | log $log"
  if [ $rc -ne 0 ] || ! echo "$summary" | grep -qE "SUMMARY: 0 (errors|hazards)"; then
    status=1
    grep -E "^=+ (Invalid|Race|Barrier|Error|.*hazard)" "$log" | head -5
  fi
  if echo "$summary" | grep -qE "\(([1-9][0-9]*) errors"; then status=1; fi
done
exit $status
