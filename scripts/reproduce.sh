#!/usr/bin/env bash
# Regenerate every committed results folder from a clean tree, with the bundled SmolLM2 on this machine.
#
#   scripts/reproduce.sh [--allow-dirty] [--list] [STEP ...]
#
# STEPs (default: all, in order) are the names in STEPS below; --list prints them with their commands.
# Refuses to run on a tree with uncommitted changes (outside results/): every result records the commit it
# came from, and only a clean commit reproduces it. --allow-dirty runs anyway; the commit is then recorded
# as <sha>+dirty in every result and each report opens with a warning. Keeps results/REPRODUCE.md: per
# step, the commit, time, machine and load of its newest run. The timings are the results, so before each step
# that reads a clock it waits until the machine is quiet (1-minute load average below $QUIET_LOAD, default
# 0.5; a step's own load takes about 80 s to decay below it) and records the load it started at. A step that
# exits 4 wrote all its results but a check of its own failed (scripts/bench.sh: a benchmark's target): its row
# says so and the run goes on, ending with status 4; any other failure stops the run, its row left as it was.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
M="smollm2-135m --device cpu --dtype float32"  # float32 even where the CPU would pick bfloat16
R=results
HEAT="$PY -m engine.viz heatmap --model $M"
STATUS_MSGS=$R/status-attention-smollm2-135m-cpu/messages_with_status.json

# One line per step: "name|command". Add a command by adding a line.
STEPS=(
  "layout|$PY -m engine.bench layout --model $M --out $R/layout-smollm2-135m-cpu --overwrite"
  "fleet|$PY -m engine.bench fleet --model $M --repeats 3 --out $R/fleet-smollm2-135m-cpu --overwrite"
  "cluster|$PY -m engine.bench cluster example:mooncake --replicas 1 2 4 8 --layouts as-sent timestamp-first --load 1 30 100 --out $R/cluster-mooncake --overwrite"
  "statusbar|$PY -m engine.bench statusbar --model $M --out $R/statusbar-smollm2-135m-cpu --overwrite"
  "compaction|$PY -m engine.bench compaction --model $M --out $R/compaction-smollm2-135m-cpu --overwrite"
  "sink|$PY -m engine.bench sink --model $M --check-transformers --out $R/sink-smollm2-135m-cpu --overwrite"
  "status-attention|$PY -m engine.bench status-attention --model $M --out $R/status-attention-smollm2-135m-cpu --overwrite"
  "needle|$PY -m engine.bench needle --model $M --out $R/needle-smollm2-135m-cpu --overwrite"
  "heatmap-chat-layer24|$HEAT --messages $R/heatmaps/chat.json --layer 24 --head mean --transform log --max-new-tokens 8 --out $R/heatmaps/chat-layer24-log.png --overwrite"
  "heatmap-chat-layers|$HEAT --messages $R/heatmaps/chat.json --layer all --head mean --transform sqrt --out $R/heatmaps/chat-layers-sqrt.png --overwrite"
  "heatmap-chat-grid|$HEAT --messages $R/heatmaps/chat.json --layer all --head all --transform exclude-sink --out $R/heatmaps/chat-layer-head-grid.png --overwrite"
  "heatmap-status-rows|$HEAT --messages $STATUS_MSGS --layer 20 --head mean --rows last:16 --transform exclude-sink --max-new-tokens 8 --out $R/heatmaps/status-last-rows-layer20.png --overwrite"
  "kv-edit|$PY -m engine.bench kv-edit --model $M --out $R/kv-edit-smollm2-135m-cpu --overwrite"
  "kv-compose|$PY -m engine.bench kv-compose --model $M --out $R/kv-compose-smollm2-135m-cpu --overwrite"
  "endpoint|$PY scripts/endpoint_run.py --model $M --out $R/endpoint-smollm2-135m-cpu --overwrite"
  "agents-cache|$PY scripts/agents_cache.py --timeout 3000 --out $R/agents-cache-synthetic_qwen2.5-0.5b-cpu --overwrite"
  "agents-cache-tiny|$PY scripts/agents_cache.py --coding-model synthetic:qwen2.5-tiny --out $R/agents-cache --overwrite"
  "bench-baseline|DEVICE=cpu DTYPES=default bash scripts/bench.sh baseline"
  "bench-baseline-bfloat16|DEVICE=cpu DTYPES=bfloat16 bash scripts/bench.sh baseline"
  "bench-serve|$PY -m pytest benchmarks/test_serve.py --devices cpu -p no:cacheprovider --benchmark-json $R/bench/cpu/serve-ttft.json"
  "bench-paged-before-after|bash scripts/bench_before_after.sh --out $R/bench/cpu/paged-before-after"
  "bench-paged-before-after-quick|bash scripts/bench_before_after.sh --quick --out $R/bench/cpu/paged-before-after-quick"
  "bench-interleaved|$PY scripts/interleaved.py --prefill 512 1024 2048 4096 --contexts 2048 4096 --warm 1024 4096 --batch 4 8 16 --solo --rounds 7 > $R/bench/cpu/interleaved.txt"
)

allow_dirty=0
list=0
wanted=()
for arg in "$@"; do
  case "$arg" in
    --allow-dirty) allow_dirty=1 ;;
    --list) list=1 ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "error: unknown option $arg" >&2; exit 2 ;;
    *) wanted+=("$arg") ;;
  esac
done

names=()
for step in "${STEPS[@]}"; do names+=("${step%%|*}"); done
for w in "${wanted[@]+"${wanted[@]}"}"; do
  if ! printf '%s\n' "${names[@]}" | grep -qx -- "$w"; then
    echo "error: no step named $w (steps: ${names[*]})" >&2
    exit 2
  fi
done
selected=()
for step in "${STEPS[@]}"; do
  name=${step%%|*}
  if [ ${#wanted[@]} -eq 0 ] || printf '%s\n' "${wanted[@]}" | grep -qx -- "$name"; then selected+=("$step"); fi
done

if [ "$list" = 1 ]; then
  for step in "${selected[@]}"; do printf '%-22s %s\n' "${step%%|*}" "${step#*|}"; done
  exit 0
fi

dirty=$(git status --porcelain -- . ':(exclude)results')
commit=$(git rev-parse --short HEAD)
if [ -n "$dirty" ]; then
  if [ "$allow_dirty" = 0 ]; then
    echo "error: the tree has uncommitted changes (outside results/); commit them, or pass --allow-dirty" >&2
    echo "$dirty" >&2
    exit 2
  fi
  commit="$commit+dirty"
  echo "WARNING: running on a DIRTY tree; every result will record $commit and say it is not a reference" >&2
fi

export HF_HUB_OFFLINE=1
# results/REPRODUCE.md is a ledger: one row per step, from the newest run of that step (a run of some steps
# keeps the other steps' rows). A row is written as soon as its step finishes.
log=$R/REPRODUCE.md
QUIET_LOAD=${QUIET_LOAD:-0.5}
flags=$(grep -m1 -o -w -E 'amx_bf16|avx512_bf16|avx512f|avx2' /proc/cpuinfo 2>/dev/null | sort -u | tr '\n' ' ' || true)
machine="$(uname -m), $(nproc) CPUs${flags:+, ${flags% }}"
load1() { cut -d' ' -f1 /proc/loadavg; }
wait_quiet() {  # until the 1-minute load average is below QUIET_LOAD; prints what it waits for
  local waited=0
  until awk -v l="$(load1)" -v q="$QUIET_LOAD" 'BEGIN { exit !(l < q) }'; do
    if [ $((waited % 60)) -eq 0 ]; then echo "  waiting for a quiet machine: load $(load1) (< $QUIET_LOAD wanted)" >&2; fi
    sleep 5
    waited=$((waited + 5))
  done
}
record() {  # name seconds command load: replace the step's row, keep the others, write them in STEPS order
  local rows row
  rows=$(grep '^| [a-z]' "$log" 2>/dev/null | grep -v '^| step |' | grep -v "^| $1 |" || true)
  row="| $1 | \`$commit\` | $(date -u +%Y-%m-%dT%H:%M:%SZ) | $machine, load $4 at start | $2 | \`$3\` |"
  rows=$(printf '%s\n%s\n' "$rows" "$row")
  {
    echo "# Reference results: how they were made"
    echo
    echo "Each row is the newest run of a step of \`scripts/reproduce.sh\`: the commit it ran from"
    echo "(\`+dirty\`: uncommitted changes, not a reference), when it finished, where, and how long it took."
    echo
    echo "| step | commit | finished (UTC) | machine | seconds | command |"
    echo "|---|---|---|---|---|---|"
    for n in "${names[@]}"; do printf '%s\n' "$rows" | grep "^| $n |" || true; done
  } > "$log.tmp"
  mv "$log.tmp" "$log"
}
total_start=$(date +%s)
i=0
for step in "${selected[@]}"; do
  i=$((i + 1))
  name=${step%%|*}
  cmd=${step#*|}
  case "$name" in
    cluster | sink | status-attention | heatmap-*) ;;  # no clock read: attention and a simulated cost model
    agents-cache-tiny) ;;  # token counts: a tiny model's seconds are no one's reference
    *) if [ -r /proc/loadavg ]; then wait_quiet; fi ;;
  esac
  load=$(load1 2>/dev/null || echo unknown)
  echo "[$i/${#selected[@]}] $name (load $load): $cmd" >&2
  start=$(date +%s)
  rc=0
  bash -c "$cmd" || rc=$?
  took=$(($(date +%s) - start))
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 4 ]; then
    echo "[$i/${#selected[@]}] $name failed (exit status $rc) after ${took}s; its ledger row is left as it was" >&2
    exit "$rc"
  fi
  checks=""
  if [ "$rc" -eq 4 ]; then checks=" (a check failed: exit 4)" && checks_failed=1; fi
  echo "[$i/${#selected[@]}] $name done in ${took}s$checks (total $(($(date +%s) - total_start))s)" >&2
  record "$name" "$took$checks" "$cmd" "$load"
done
total=$(($(date +%s) - total_start))
echo "all ${#selected[@]} steps done in $((total / 60)) min $((total % 60)) s; ledger in $log" >&2
if [ "${checks_failed:-0}" = 1 ]; then exit 4; fi
