"""`VllmBlockHash`: block hashes as vLLM computes them (vllm/v1/core/kv_cache_utils.py `hash_block_tokens`,
vllm/utils/hashing.py), so the prefix cache's block ids are the ids vLLM would publish for the same tokens.

A block's hash is `hash_fn((parent, tuple(token_ids), extra_keys))`, the parent of a chain's first block
`NONE_HASH = hash_fn(seed)` with the seed `$PYTHONHASHSEED`, else vLLM's fixed "vllm-none-hash"; the extra
keys are `(("cache_salt", salt),)` on the block at token 0 of a request with a cache salt, else None. That
is vLLM 0.34 (checked against its wheel); vLLM 0.23 hashed the bare salt and, without PYTHONHASHSEED, drew
a random seed per process. `hash_fn`:
- `sha256_cbor`: SHA-256 of the canonical CBOR encoding (cbor2), vLLM's choice for hashes shared across
  languages and processes;
- `sha256`: SHA-256 of the pickle (protocol 5) encoding, vLLM's default; equal bytes for equal Python
  objects, so equal to vLLM's on the same Python (vLLM warns it may differ across Python versions).
"""

from __future__ import annotations

import hashlib
import os
import pickle
from collections.abc import Callable, Sequence
from typing import Any

from engine.errors import InvalidArgumentError

DEFAULT_SEED = "vllm-none-hash"
SCHEMES = ("vllm-sha256-cbor", "vllm-sha256")


def sha256_pickle(value: Any) -> bytes:
    return hashlib.sha256(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)).digest()


def sha256_cbor_function() -> Callable[[Any], bytes]:
    try:
        import cbor2
    except ImportError:
        raise InvalidArgumentError(
            "--prefix-hash vllm-sha256-cbor needs cbor2: pip install 'kvtestbed[kv-events]'"
        ) from None
    return lambda value: hashlib.sha256(cbor2.dumps(value, canonical=True)).digest()


class VllmBlockHash:
    def __init__(self, scheme: str, seed: str | None = None) -> None:
        if scheme not in SCHEMES:
            raise InvalidArgumentError(f"prefix hash {scheme!r}: expected one of {', '.join(SCHEMES)}")
        self.scheme = scheme
        self.fn = sha256_cbor_function() if scheme == "vllm-sha256-cbor" else sha256_pickle
        self.seed = os.environ.get("PYTHONHASHSEED", DEFAULT_SEED) if seed is None else seed
        self.none_hash = self.fn(self.seed)

    def block(self, parent: bytes, token_ids: Sequence[int], cache_salt: str | None) -> bytes:
        """The hash of a full block after `parent` (`none_hash` for a chain's first); `cache_salt` only on
        the block at token 0."""
        extra = (("cache_salt", cache_salt),) if cache_salt else None
        return self.fn((parent, tuple(token_ids), extra))
