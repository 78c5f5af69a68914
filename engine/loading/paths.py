"""Where kvtestbed keeps converted models, tokenizers and weight digests: `$KVTESTBED_CACHE` or
~/.cache/kvtestbed. Reading needs nothing: what is absent is made, and only making it needs the folder
to be writable (else one `CacheFolderError` line says so)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from engine.errors import CacheFolderError


def cache_root() -> Path:
    """The cache folder (not made here: it may not exist yet)."""
    return Path(os.environ.get("KVTESTBED_CACHE") or Path.home() / ".cache" / "kvtestbed")


def writable_cache_folder(*parts: str) -> Path:
    """The cache folder `parts` to write into, made if absent, checked to take a file."""
    folder = cache_root().joinpath(*parts)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as e:
        raise cache_write_error(folder, e) from None
    return folder


def cache_write_error(folder: Path, e: OSError) -> CacheFolderError:
    return CacheFolderError(
        f"the kvtestbed cache folder {folder} cannot be written ({e.strerror or e}): set KVTESTBED_CACHE to "
        "a writable folder"
    )
