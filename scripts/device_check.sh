#!/usr/bin/env bash
# One device end to end: device tests, benchmarks against transformers, layout bench, summary (at most 8 min
# on a GPU after the attention kernels' warm-up). See scripts/device_check.py.
#
#   scripts/device_check.sh cuda|mps|cpu [--dry-run] [--out DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-python}" scripts/device_check.py "$@"
