#!/usr/bin/env bash
# The benchmark suite on this machine's device, then the report and the comparison with the committed baseline.
#
#   scripts/bench.sh [NAME] [pytest options, e.g. --quick or --budget 5]
#
# Writes results/bench/<device>/NAME.json (pytest-benchmark), NAME.md (summary) and NAME.png (figure);
# NAME defaults to "run". With NAME=baseline it (re)writes the baseline and compares nothing.
# DEVICE=cpu|cuda|mps overrides the choice (default: cuda, then mps, then cpu). A ratio regresses when it lies
# above the baseline's own spread over its rounds (scripts/bench_compare.py). STRICT=1 (CI's setting) makes
# it a gate: a missing baseline, or one that does not cover the run (a metric it lacks or has no spread for, or
# one the run lacks), fails with exit status 3 instead of passing unjudged. On a CPU with bfloat16 matrix instructions
# (AMX-BF16 or AVX512-BF16, as engine.devices detects them) the suite runs twice: in float32 (NAME.*) and in
# bfloat16 (NAME-bfloat16.*, compared with baseline-bfloat16.json), both dtypes being fast there; elsewhere
# bfloat16 is emulated and slow, and only float32 runs. DTYPES=default (the device's default dtype: float32 on a CPU)
# or DTYPES=bfloat16 runs that one alone, e.g. one baseline at a time. A case that fails its own assertion (a target
# of its own, as test_neighbour's) does not stop the run: every timing is kept, reported and compared, and the
# failure is named at the end. Exit status: the first failing comparison's (1: a regression, 2: unusable runs, 3:
# with STRICT=1, no baseline or one that does not cover the run), else 4 where a case failed its own assertion,
# else 0; pytest's own where it stopped otherwise (2 or more: nothing to report).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
DEVICE=${DEVICE:-$("$PY" -c 'from engine.devices import resolve_device; print(resolve_device(None).type)')}
STRICT=${STRICT:-0}
NAME=${1:-run}
shift || true
OUT=results/bench/$DEVICE
mkdir -p "$OUT"
export HF_HUB_OFFLINE=1
# The dtypes worth timing on this device: float32 on a CPU, plus bfloat16 where the CPU computes it natively;
# DTYPES="default" or "bfloat16" picks one of them
if [ -n "${DTYPES:-}" ]; then
  for dtype in $DTYPES; do
    case "$dtype" in
      default | bfloat16) ;;
      *) echo "error: DTYPES takes default and/or bfloat16, not $dtype" >&2; exit 2 ;;
    esac
  done
else
  DTYPES=default
  if [ "$DEVICE" = cpu ] && [ -n "$("$PY" -c 'from engine.devices import cpu_bf16_flags; print(*cpu_bf16_flags())')" ]; then
    DTYPES="default bfloat16"
  fi
fi
status=0
failed=()  # runs in which a case failed its own assertion
for dtype in $DTYPES; do
  if [ "$dtype" = default ]; then run=$NAME base=baseline opts=(); else run=$NAME-$dtype base=baseline-$dtype opts=(--dtype "$dtype"); fi
  rc=0
  "$PY" -m pytest benchmarks --devices "$DEVICE" ${opts[@]+"${opts[@]}"} --benchmark-json "$OUT/$run.json" "$@" || rc=$?
  if [ "$rc" -eq 1 ]; then
    failed+=("$run")
  elif [ "$rc" -ne 0 ]; then
    echo "error: the $run run stopped (pytest exit status $rc)" >&2
    exit "$rc"
  fi
  "$PY" scripts/bench_report.py "$OUT/$run.json"
  if [ "$NAME" = baseline ]; then
    echo "wrote the baseline $OUT/$run.json"
  elif [ -f "$OUT/$base.json" ]; then
    strict=()
    if [ "$STRICT" = 1 ]; then strict=(--strict); fi
    "$PY" scripts/bench_compare.py "$OUT/$run.json" "$OUT/$base.json" ${strict[@]+"${strict[@]}"} || {
      rc=$?
      [ "$status" -ne 0 ] || status=$rc
    }
  else
    echo "no $OUT/$base.json to compare with; make one with: scripts/bench.sh baseline"
    if [ "$STRICT" = 1 ] && [ "$status" -eq 0 ]; then status=3; fi
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "cases failed their own assertion in the ${failed[*]} run (named in pytest's summary above); every timing is kept" >&2
  [ "$status" -ne 0 ] || status=4
fi
exit $status
