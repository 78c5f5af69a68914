#!/usr/bin/env bash
# Regenerate every committed results folder from a clean tree, with the bundled SmolLM2 on this machine.
#
#   scripts/reproduce.sh [--allow-dirty] [--list] [STEP ...]
#
# STEPs (default: all, in order) are the names in STEPS below; --list prints them with their commands.
# Refuses to run on a tree with uncommitted changes (outside results/): every result records the commit it
# came from, and only a clean commit reproduces it. --allow-dirty runs anyway; the commit is then recorded
# as <sha>+dirty in every result and each report opens with a warning. Writes results/REPRODUCE.md: the
# commit, the machine, each step's command and time. Run it on a quiet machine: the timings are the results.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
M=smollm2-135m
R=results
HEAT="$PY -m engine.viz heatmap --model $M"
STATUS_MSGS=$R/status-attention-smollm2-135m-cpu/messages_with_status.json

# One line per step: "name|command". Add a command by adding a line.
STEPS=(
  "layout|$PY -m engine.bench layout --model $M --out $R/layout-smollm2-135m-cpu --overwrite"
  "statusbar|$PY -m engine.bench statusbar --model $M --out $R/statusbar-smollm2-135m-cpu --overwrite"
  "compaction|$PY -m engine.bench compaction --model $M --out $R/compaction-smollm2-135m-cpu --overwrite"
  "sink|$PY -m engine.bench sink --model $M --check-transformers --out $R/sink-smollm2-135m-cpu --overwrite"
  "status-attention|$PY -m engine.bench status-attention --model $M --out $R/status-attention-smollm2-135m-cpu --overwrite"
  "heatmap-chat-layer24|$HEAT --messages $R/heatmaps/chat.json --layer 24 --head mean --transform log --max-new-tokens 8 --out $R/heatmaps/chat-layer24-log.png --overwrite"
  "heatmap-chat-layers|$HEAT --messages $R/heatmaps/chat.json --layer all --head mean --transform sqrt --out $R/heatmaps/chat-layers-sqrt.png --overwrite"
  "heatmap-chat-grid|$HEAT --messages $R/heatmaps/chat.json --layer all --head all --transform exclude-sink --out $R/heatmaps/chat-layer-head-grid.png --overwrite"
  "heatmap-status-rows|$HEAT --messages $STATUS_MSGS --layer 20 --head mean --rows last:16 --transform exclude-sink --max-new-tokens 8 --out $R/heatmaps/status-last-rows-layer20.png --overwrite"
  "kv-edit|$PY -m engine.bench kv-edit --model $M --out $R/kv-edit-smollm2-135m-cpu --overwrite"
  "kv-compose|$PY -m engine.bench kv-compose --model $M --out $R/kv-compose-smollm2-135m-cpu --overwrite"
  "bench-baseline|DEVICE=cpu bash scripts/bench.sh baseline"
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
log=$R/REPRODUCE.md
{
  echo "# Reference results: how they were made"
  echo
  echo "- commit \`$commit\`$([ -n "$dirty" ] && echo ' (**DIRTY TREE: not a reference run**)')"
  echo "- started $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m), $(nproc) CPUs; by \`scripts/reproduce.sh $*\`"
  echo
  echo "| step | command | seconds |"
  echo "|---|---|---|"
} > "$log.tmp"
total_start=$(date +%s)
i=0
for step in "${selected[@]}"; do
  i=$((i + 1))
  name=${step%%|*}
  cmd=${step#*|}
  echo "[$i/${#selected[@]}] $name: $cmd" >&2
  start=$(date +%s)
  bash -c "$cmd"
  took=$(($(date +%s) - start))
  echo "[$i/${#selected[@]}] $name done in ${took}s (total $(($(date +%s) - total_start))s)" >&2
  echo "| $name | \`$cmd\` | $took |" >> "$log.tmp"
done
total=$(($(date +%s) - total_start))
echo "" >> "$log.tmp"
echo "Total: ${total}s." >> "$log.tmp"
mv "$log.tmp" "$log"
echo "all ${#selected[@]} steps done in $((total / 60)) min $((total % 60)) s; log in $log" >&2
