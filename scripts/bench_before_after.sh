#!/usr/bin/env bash
# The paged engine's owed before/after: the same benchmark files (this tree's benchmarks/) run against the
# engine at the commit before the paged engine and at this commit, one after the other, then compared.
#
#   scripts/bench_before_after.sh [--before REV] [--out DIR] [pytest options, e.g. --quick or --budget 3]
#
# BEFORE (default c6e2921^, the commit before "Attention reads the paged pool in place") is checked out in a
# temporary git worktree that gets this tree's benchmarks/ (the cases time the public API: Engine.generate /
# Engine.step on synthetic:qwen2.5-0.5b, transformers on the same weights), and run there, so `engine` is that
# commit's; then the same cases run here. Cases: test_prefix.py::test_warm_against_contiguous,
# test_decode.py, test_batch.py::test_decode_batch, on the CPU. Writes DIR (default
# results/bench/cpu/paged-before-after): before.json / after.json (pytest-benchmark), their .md / .png
# summaries (scripts/bench_report.py), and comparison.txt (scripts/bench_compare.py: after's ratios against
# before's, each judged by before's own spread). Time it on a quiet machine: the full shapes take about
# 25 minutes per side on 2 cores, --quick a few. A case that fails its own assertion (a benchmark's target, as
# test_decode_weight_stream's) does not stop the run: its timings are kept, the side is named as failing in the
# output and in comparison.txt. Exit status: pytest's when a side stops otherwise (2 or more), bench_compare's 2
# on unusable runs, else 0.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
BEFORE=c6e2921^
OUT=results/bench/cpu/paged-before-after
ARGS=()  # everything else goes to pytest, before or after --before / --out
while [ $# -gt 0 ]; do
  case "$1" in
    --before) BEFORE=${2:?--before needs a commit}; shift 2 ;;
    --out) OUT=${2:?--out needs a folder}; shift 2 ;;
    *) ARGS+=("$1"); shift ;;
  esac
done
CASES=(benchmarks/test_prefix.py::test_warm_against_contiguous benchmarks/test_decode.py benchmarks/test_batch.py::test_decode_batch)
export HF_HUB_OFFLINE=1
# Both engines' OpenMP threads wait as today's engine sets them (engine/openmp.py, which the earlier engine
# predates): libgomp's default spinning on one side only would time the wait policy, not the engine. A wait
# variable the user set is kept, for both.
if [ -z "${OMP_WAIT_POLICY:-}${GOMP_SPINCOUNT:-}${KMP_BLOCKTIME:-}" ]; then export OMP_WAIT_POLICY=PASSIVE; fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
HERE=$(pwd)
failed=()
side() {  # side NAME DIR: the cases with DIR's engine; exit 1 (a case failed) is noted and the run goes on
  local rc=0
  (cd "$2" && PYTHONPATH="$2" "$PY" -m pytest "${CASES[@]}" --devices cpu -p no:cacheprovider \
    --benchmark-json "$OUT/$1.json" ${ARGS[@]+"${ARGS[@]}"}) || rc=$?
  if [ "$rc" -eq 1 ]; then
    failed+=("$1")
  elif [ "$rc" -ne 0 ]; then
    echo "error: the $1 run stopped (pytest exit status $rc)" >&2
    exit "$rc"
  fi
}
before=$(git rev-parse --verify --quiet "$BEFORE^{commit}") || { echo "error: --before $BEFORE is no commit" >&2; exit 2; }
tree=$(mktemp -d)
trap 'git -C "$HERE" worktree remove --force "$tree" 2>/dev/null || rm -rf "$tree"' EXIT
git worktree add --detach --quiet "$tree" "$before"
rm -rf "$tree/benchmarks" && cp -r benchmarks "$tree/benchmarks"
echo "before: $(git log -1 --format='%h %s' "$before" | cut -c1-100)"
side before "$tree"
echo "after: $(git log -1 --format='%h %s' HEAD | cut -c1-100)$(git diff --quiet HEAD -- engine benchmarks || echo ' (+ uncommitted changes)')"
side after "$HERE"
"$PY" scripts/bench_report.py "$OUT/before.json"
"$PY" scripts/bench_report.py "$OUT/after.json"
status=0
"$PY" scripts/bench_compare.py "$OUT/after.json" "$OUT/before.json" > "$OUT/comparison.txt" || status=$?
if [ ${#failed[@]} -gt 0 ]; then
  echo "cases failed in the ${failed[*]} run (a target of their own, or an error: see its output); what ran is kept" \
    >> "$OUT/comparison.txt"
fi
cat "$OUT/comparison.txt"
echo "wrote $OUT/{before,after}.{json,md,png} and comparison.txt"
[ "$status" -eq 2 ] && exit 2
exit 0
