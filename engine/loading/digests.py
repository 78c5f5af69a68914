"""sha256 of weight files, memoised in the user cache (`digests.json`) by (path, size, mtime).

The memo only saves re-reading files: a corrupt or unreadable `digests.json` is read as empty and
rewritten, and where the cache folder cannot be written the digests are computed each time instead.
Hugging Face hub blobs are named by their sha256 already.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from pathlib import Path

from engine.loading.paths import cache_root

MEMO = "digests.json"


def file_sha256(path: Path) -> str:
    """sha256 of a file, memoised by (path, size, mtime)."""
    real = path.resolve()
    if real.parent.name == "blobs" and re.fullmatch(r"[0-9a-f]{64}", real.name):
        return real.name
    memo = _read_memo()
    key = _key(real)
    if key not in memo:
        memo[key] = sha256_of(real)
        _write_memo(memo)
    return memo[key]


def remember(path: Path, digest: str) -> None:
    """Record the digest of a file just written (computed from its bytes), so that no load reads it again."""
    memo = _read_memo()
    memo[_key(path.resolve())] = digest
    _write_memo(memo)


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 24):
            h.update(chunk)
    return h.hexdigest()


def _key(real: Path) -> str:
    stat = real.stat()
    return f"{real}:{stat.st_size}:{stat.st_mtime_ns}"


def _read_memo() -> dict[str, str]:
    try:
        memo = json.loads((cache_root() / MEMO).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):  # absent, unreadable or corrupt: start over
        return {}
    if not isinstance(memo, dict):
        return {}
    return {k: v for k, v in memo.items() if isinstance(v, str) and re.fullmatch(r"[0-9a-f]{64}", v)}


def _write_memo(memo: dict[str, str]) -> None:
    memo_file = cache_root() / MEMO
    tmp = memo_file.with_suffix(f".{os.getpid()}.tmp")
    try:
        memo_file.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(memo, indent=1))
        tmp.replace(memo_file)
    except OSError:  # a read-only cache: the digest is right, only not remembered
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
