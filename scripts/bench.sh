#!/usr/bin/env bash
# The benchmark suite on this machine's device, then the report and the comparison with the committed baseline.
#
#   scripts/bench.sh [NAME] [pytest options, e.g. --quick or --budget 5]
#
# Writes results/bench/<device>/NAME.json (pytest-benchmark), NAME.md (summary) and NAME.png (figure);
# NAME defaults to "run". With NAME=baseline it (re)writes the baseline and compares nothing.
# DEVICE=cpu|cuda|mps overrides the choice (default: cuda, then mps, then cpu); THRESHOLD (default 0.25) is
# the relative growth of a ratio that counts as a regression. Exit status: the comparison's (1: a regression).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
DEVICE=${DEVICE:-$("$PY" -c 'from engine.devices import resolve_device; print(resolve_device(None).type)')}
NAME=${1:-run}
shift || true
OUT=results/bench/$DEVICE
mkdir -p "$OUT"
export HF_HUB_OFFLINE=1
"$PY" -m pytest benchmarks --devices "$DEVICE" --benchmark-json "$OUT/$NAME.json" "$@"
"$PY" scripts/bench_report.py "$OUT/$NAME.json"
if [ "$NAME" = baseline ]; then
  echo "wrote the baseline $OUT/baseline.json"
elif [ -f "$OUT/baseline.json" ]; then
  "$PY" scripts/bench_compare.py "$OUT/$NAME.json" "$OUT/baseline.json" --threshold "${THRESHOLD:-0.25}"
else
  echo "no $OUT/baseline.json to compare with; make one with: scripts/bench.sh baseline"
fi
