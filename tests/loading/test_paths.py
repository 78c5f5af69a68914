"""The user cache folder: read without being made; a folder that must be written and cannot be is one line."""

from __future__ import annotations

import pytest

from engine.errors import CacheFolderError
from engine.loading.paths import cache_root, writable_cache_folder


def test_reading_makes_no_folder_and_writing_says_where_it_cannot(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("KVTESTBED_CACHE", str(tmp_path / "cache"))
    assert cache_root() == tmp_path / "cache" and not cache_root().exists()
    assert (
        writable_cache_folder("gguf") == tmp_path / "cache" / "gguf"
        and (tmp_path / "cache" / "gguf").is_dir()
    )
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv("KVTESTBED_CACHE", str(tmp_path / "file"))
    with pytest.raises(
        CacheFolderError, match=r"file/tokenizers cannot be written \(.*\): set KVTESTBED_CACHE"
    ):
        writable_cache_folder("tokenizers")
