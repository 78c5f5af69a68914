"""Weight digests memoised in the user cache: a corrupt or unwritable memo never fails a load."""

from __future__ import annotations

import hashlib
import json

import pytest

import engine
from engine.loading.digests import MEMO, file_sha256


@pytest.mark.parametrize("memo", ["{broken", "[1, 2]", '{"k": 5}', "\xff\xfe"])
def test_a_corrupt_memo_is_read_as_empty_and_rewritten(tmp_path, monkeypatch, memo: str) -> None:
    monkeypatch.setenv("KVTESTBED_CACHE", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / MEMO).write_text(memo, errors="surrogateescape")
    weights = tmp_path / "w.safetensors"
    weights.write_bytes(b"weights")
    assert file_sha256(weights) == hashlib.sha256(b"weights").hexdigest()
    assert list(json.loads((tmp_path / "cache" / MEMO).read_text()).values()) == [file_sha256(weights)]


def test_a_memo_that_cannot_be_written_leaves_loading_working(tiny_dir, tmp_path, monkeypatch) -> None:
    """A read-only cache: the digest is computed every time instead of remembered."""
    monkeypatch.setenv("KVTESTBED_CACHE", str(tmp_path / "cache"))
    (tmp_path / "cache" / MEMO).mkdir(parents=True)  # where the memo file would go: nothing can be written
    first = engine.load(str(tiny_dir("qwen2")), device="cpu", cache_tokens=64)
    second = engine.load(str(tiny_dir("qwen2")), device="cpu", cache_tokens=64)
    assert first.source.digest == second.source.digest and (tmp_path / "cache" / MEMO).is_dir()
