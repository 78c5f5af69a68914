"""A real `python -m engine.serve` process for the --endpoint tests: a tiny random Qwen2 with the offline Qwen
tokenizer behind an API key, on a free loopback port, started once per session and always terminated."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.serve.conftest import Server, start, stop, wait_ready

KEY = "test-key-22-secret"
KEY_ENV = "KVTESTBED_TEST_ENDPOINT_KEY"


@pytest.fixture(scope="session")
def qwen_dir(tiny_dir: Callable[..., Path]) -> Path:
    return tiny_dir("qwen2", tokenizer=True)


@pytest.fixture(scope="session")
def server(qwen_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    log = tmp_path_factory.mktemp("endpoint") / "server.log"
    s = start(["--model", str(qwen_dir), "--device", "cpu", "--cache-tokens", "32768", "--api-key", KEY], log)
    s.key = KEY
    try:
        wait_ready(s)
        yield s
    finally:
        stop(s)
