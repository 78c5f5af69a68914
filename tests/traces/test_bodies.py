"""Trace requests as live request bodies: each API's body, read back as the server reads it, renders to the
tokens the trace's request renders to (the shipped examples, every format, both APIs)."""

from __future__ import annotations

import pytest

from engine.errors import TraceError
from engine.prompts.chat import render_text
from engine.traces.anthropic_messages import parse_anthropic
from engine.traces.bodies import (
    ANTHROPIC,
    OPENAI,
    anthropic_body,
    as_sent,
    normalized_positions,
    request_body,
    responses_body,
)
from engine.traces.inputs import load_inputs
from engine.traces.request import TraceRequest
from engine.traces.responses import parse_responses
from engine.traces.shipped import EXAMPLES


@pytest.fixture(scope="module")
def tokenizer():
    """The offline Qwen tokenizer (its chat template renders tools)."""
    from engine.loading.tokenizer import load_tokenizer, qwen_tokenizer_dir

    return load_tokenizer(qwen_tokenizer_dir())


@pytest.mark.parametrize("api", [OPENAI, ANTHROPIC])
@pytest.mark.parametrize("fmt", [f for f in EXAMPLES if f != "mooncake"])  # hash ids: no text to send
def test_a_body_renders_as_its_request(tokenizer, fmt: str, api: str) -> None:
    for req in load_inputs([f"example:{fmt}"]).requests:
        sent = as_sent(req, request_body(req, api), api)
        assert sent.session == req.session and sent.timestamp == req.timestamp
        assert render_text(tokenizer, sent.messages, sent.tools) == render_text(
            tokenizer, req.messages, req.tools
        )
        if api == ANTHROPIC:  # the same blocks marked, counted in the normalized request's blocks
            ours, theirs = normalized_positions(req, "r"), normalized_positions(sent, "s")
            assert [(ours[b.block], b.ttl_s) for b in req.breakpoints] == [
                (theirs[b.block], b.ttl_s) for b in sent.breakpoints
            ]
            assert len(sent.breakpoints) == len(req.breakpoints)


def test_breakpoints_on_joined_text_blocks_mark_the_joined_block() -> None:
    """Two text blocks of one user turn become one normalized text: a breakpoint on either marks it."""
    body = {
        "model": "m",
        "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "first part"},
                    {
                        "type": "text",
                        "text": "second part",
                        "cache_control": {"type": "ephemeral", "ttl": "1h"},
                    },
                ],
            }
        ],
    }
    req = parse_anthropic(body)
    assert len(req.blocks) == 3 and [b.block for b in req.breakpoints] == [0, 2]
    out = request_body(req, ANTHROPIC)
    assert out["system"][0]["cache_control"] == {"type": "ephemeral"}
    (turn,) = out["messages"]
    assert turn["content"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}


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


@pytest.mark.parametrize("fmt", [f for f in EXAMPLES if f != "mooncake"])
def test_a_responses_body_parses_back_to_its_request(tokenizer, fmt: str) -> None:
    for req in load_inputs([f"example:{fmt}"]).requests:
        back = parse_responses(responses_body(req))
        assert render_text(tokenizer, back.messages, back.tools) == render_text(
            tokenizer, req.messages, req.tools
        )
        assert (back.cache_key, back.cache_retention) == (req.cache_key, req.cache_retention)


def test_a_later_system_message_is_an_anthropic_system_turn_where_asked() -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
        {"role": "system", "content": "The time is 09:00."},
    ]
    req = TraceRequest(messages)
    with pytest.raises(TraceError, match="system message after the first message"):
        request_body(req, ANTHROPIC)
    assert parse_anthropic(anthropic_body(req, system_turns=True)).messages == messages
