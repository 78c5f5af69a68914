"""Fixtures of the loading tests: a private kvtestbed cache."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A kvtestbed cache of this test's own: a GGUF the test writes is converted (or refused) there, never read
    from or left in the user cache that every checkout on the machine shares."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("KVTESTBED_CACHE", str(cache))
    return cache
