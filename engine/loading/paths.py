"""Where kvtestbed keeps converted models, tokenizers and weight digests: `$KVTESTBED_CACHE` or
~/.cache/kvtestbed."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    root = Path(os.environ.get("KVTESTBED_CACHE") or Path.home() / ".cache" / "kvtestbed")
    root.mkdir(parents=True, exist_ok=True)
    return root
