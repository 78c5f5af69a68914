"""Trace requests as live request bodies: each API's body, read back as the server reads it, renders to the
tokens the trace's request renders to (the shipped examples, every format, both APIs)."""

from __future__ import annotations

import pytest

from engine.errors import TraceError
from engine.prompts.chat import render_text
from engine.traces.bodies import ANTHROPIC, OPENAI, as_sent, request_body
from engine.traces.load import load_traces
from engine.traces.request import TraceRequest
from engine.traces.shipped import EXAMPLES


@pytest.fixture(scope="module")
def tokenizer():
    """The offline Qwen tokenizer (its chat template renders tools)."""
    from engine.loading.tokenizer import load_tokenizer, qwen_tokenizer_dir

    return load_tokenizer(qwen_tokenizer_dir())


@pytest.mark.parametrize("api", [OPENAI, ANTHROPIC])
@pytest.mark.parametrize("fmt", list(EXAMPLES))
def test_a_body_renders_as_its_request(tokenizer, fmt: str, api: str) -> None:
    for req in load_traces([f"example:{fmt}"]):
        sent = as_sent(req, request_body(req, api), api)
        assert sent.session == req.session and sent.timestamp == req.timestamp
        assert render_text(tokenizer, sent.messages, sent.tools) == render_text(
            tokenizer, req.messages, req.tools
        )
        if api == ANTHROPIC:
            assert sent.breakpoints == req.breakpoints


def test_what_anthropic_cannot_express_is_refused_by_name() -> None:
    late_system = TraceRequest([{"role": "user", "content": "a"}, {"role": "system", "content": "b"}])
    with pytest.raises(TraceError, match="request 3: message 1 is a system message.*--api openai"):
        request_body(late_system, ANTHROPIC, "request 3")
    call = {"id": "c1", "function": {"name": "f", "arguments": "not json"}}
    raw = TraceRequest(
        [{"role": "user", "content": "a"}, {"role": "assistant", "content": "", "tool_calls": [call]}]
    )
    with pytest.raises(TraceError, match="not a JSON object"):
        request_body(raw, ANTHROPIC)
    assert request_body(raw, OPENAI)["messages"][1]["tool_calls"][0]["function"]["arguments"] == "not json"
