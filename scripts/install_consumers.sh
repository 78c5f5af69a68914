#!/usr/bin/env bash
# The KV-event consumers' own code for tests/serve/test_kv_consumers.py (optional: those tests skip, saying
# what is missing, without it):
# - kvtestbed[consumers]: msgspec (vLLM's event classes) and cbor2 (vLLM's sha256_cbor);
# - ai-dynamo-runtime (NVIDIA Dynamo's standalone KV indexer, `python -m dynamo.indexer`), with --no-deps: its
#   one other requirement is pydantic, which the server already has, and its uvloop would change the event
#   loop every uvicorn server of the test suite runs on;
# - vLLM's wheels 0.34.0 (tagged-map events) and 0.23.0 (positional arrays), downloaded, not installed (no
#   torch): the tests read vllm/distributed/kv_events.py and the block hashing from them by path. Kept in the
#   user cache ($KVTESTBED_CACHE, default ~/.cache/kvtestbed), consumers/.
# The interpreter: $PYTHON, else python.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
WHEELS="${KVTESTBED_CACHE:-$HOME/.cache/kvtestbed}/consumers"
mkdir -p "$WHEELS"
"$PY" -m pip install -q -e ".[consumers]"
"$PY" -m pip install -q --no-deps "ai-dynamo-runtime==1.6.1"
for version in 0.34.0 0.23.0; do
  if ! ls "$WHEELS"/vllm-"$version"-*.whl >/dev/null 2>&1; then
    "$PY" -m pip download -q --no-deps --only-binary=:all: --timeout 60 "vllm==$version" -d "$WHEELS"
  fi
done
echo "consumers installed; vLLM's wheels in $WHEELS"
