"""Errors in both APIs' shapes, and no traceback to any client: engine errors map to 4xx, anything else to
a generic 500 (logged server-side). The 500 paths are forced in a real server on a loopback port, run in
this process over a tiny random Qwen2 so that a part of it can be made to fail."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import engine
from engine.errors import CacheCapacityError, ContextOverflowError, NumericalError, PromptError
from engine.serve import openai_response
from engine.serve.app import ServerState, build_state
from engine.serve.errors import APIError, from_engine
from engine.traces.request import FieldError
from tests.serve.conftest import http
from tests.serve.in_process import serving

SECRET = "secret internal detail"


def test_engine_errors_become_client_errors() -> None:
    cases = {
        ContextOverflowError("prompt of 9 tokens + ..."): (400, "messages", "context_length_exceeded"),
        CacheCapacityError("needs 5 more KV blocks"): (400, "max_tokens", "kv_cache_capacity_exceeded"),
        PromptError("empty prompt"): (400, "messages", None),
        FieldError("messages[0].content", "expected a string"): (400, "messages[0].content", None),
        NumericalError("NaN logits"): (500, None, "numerical_error"),
        RuntimeError(SECRET): (500, None, "internal_error"),
    }
    for error, (status, param, code) in cases.items():
        e = from_engine(error)
        assert (e.status, e.param, e.code) == (status, param, code)
    assert SECRET not in from_engine(RuntimeError(SECRET)).message
    shaped = APIError(413, "too big", code="request_too_large")
    assert shaped.openai_body() == {
        "error": {
            "message": "too big",
            "type": "invalid_request_error",
            "param": None,
            "code": "request_too_large",
        }
    }
    assert shaped.anthropic_body() == {
        "type": "error",
        "error": {"type": "request_too_large", "message": "too big"},
    }


@pytest.fixture(scope="module")
def in_process(tiny_dir: Callable[..., Path]) -> Iterator[tuple[str, ServerState]]:
    state = build_state(
        engine.load(str(tiny_dir("qwen2", tokenizer=True)), device="cpu", cache_tokens=4096), ["tiny"]
    )
    with serving(state) as server:
        yield server.url, state


def fail(*_args: object, **_kwargs: object) -> None:
    raise RuntimeError(SECRET)


def clean(text: str) -> None:
    assert SECRET not in text and "Traceback" not in text


def test_a_failure_anywhere_is_a_500_without_its_traceback(
    in_process, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, state = in_process
    body = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    monkeypatch.setattr(state.page, "since", fail)  # in a route
    reply = http("GET", f"{url}/v1/kvtestbed/requests")
    assert reply.status == 500 and reply.json()["error"]["code"] == "internal_error"
    clean(reply.text)
    monkeypatch.setattr(state.page, "add", fail)  # on the engine thread, after generating
    for path, shape in (("/v1/chat/completions", "error"), ("/v1/messages", "type")):
        reply = http("POST", url + path, body)
        assert reply.status == 500 and shape in reply.json()
        clean(reply.text)
    monkeypatch.undo()
    monkeypatch.setattr(openai_response, "outcome_of", fail)  # while streaming
    reply = http("POST", f"{url}/v1/chat/completions", body | {"stream": True})
    last = json.loads(reply.text.strip().split("\n\n")[-1].removeprefix("data: "))
    assert reply.status == 200 and last["error"]["code"] == "internal_error"
    clean(reply.text)
    monkeypatch.undo()
    ok = http("POST", f"{url}/v1/chat/completions", body)  # the server goes on
    assert ok.status == 200 and ok.json()["usage"]["completion_tokens"] == 2
