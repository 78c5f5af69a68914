"""The red-team harness's servers: `python -m engine.serve`'s app in the test's own process (uvicorn on a free
loopback port) over one tiny random Qwen2 with the offline Qwen tokenizer (its template has a tool section),
one per test module, so a case can also look into the server's state (the response store's bytes, the
record)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import engine
from engine.runtime.engine import Engine
from engine.serve.app import build_state
from tests.serve.in_process import InProcess, serving

MODEL = "tiny"
KEY = "redteam-key"


@pytest.fixture(scope="session")
def tiny_engine(tiny_dir: Callable[..., Path]) -> Engine:
    return engine.load(str(tiny_dir("qwen2", tokenizer=True)), device="cpu", cache_tokens=8192)


@pytest.fixture(scope="module")
def open_server(tiny_engine: Engine) -> Iterator[InProcess]:
    """No API key: clients are told apart by the key they present, their session, or not at all."""
    with serving(build_state(tiny_engine, [MODEL], default_max_tokens=4)) as server:
        yield server


@pytest.fixture(scope="module")
def keyed_server(tiny_engine: Engine) -> Iterator[InProcess]:
    with serving(build_state(tiny_engine, [MODEL], api_key=KEY, default_max_tokens=4)) as server:
        yield server


def serve(tiny_engine: Engine, **options: Any) -> Any:
    """A server with `options` (build_state's), as a context manager."""
    return serving(build_state(tiny_engine, [MODEL], **options))
