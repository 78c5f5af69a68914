"""The three input formats parse to the same normalized request; malformed input names its field."""

from __future__ import annotations

from typing import Any

import pytest

from engine.traces.anthropic_messages import parse_anthropic
from engine.traces.blocks import derived_blocks
from engine.traces.openai_chat import parse_chat_completions
from engine.traces.request import Breakpoint, FieldError
from engine.traces.responses import parse_responses
from tests.traces.conversation import anthropic, chat, responses

PARSERS = [(parse_chat_completions, chat), (parse_responses, responses), (parse_anthropic, anthropic)]


def without(message: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in message.items() if k not in keys}


@pytest.mark.parametrize(("parse", "body"), PARSERS)
def test_every_format_normalizes_to_the_same_conversation(parse, body) -> None:
    req = parse(body())
    reference = parse_chat_completions(chat())
    assert [without(m, "name") for m in req.messages] == [without(m, "name") for m in reference.messages]
    assert req.tools == reference.tools


def test_anthropic_breakpoints_land_on_their_blocks() -> None:
    """Blocks in Anthropic's order, tools -> system -> messages, one per content block (two text blocks
    of one message stay two; thinking is dropped); each marker on its own block."""
    body = anthropic()
    body["tools"][0]["cache_control"] = {"type": "ephemeral"}
    body["cache_control"] = {"type": "ephemeral"}
    req = parse_anthropic(body)
    assert [b.section for b in req.blocks] == ["tools", "system", *["messages"] * 5]
    assert [b.text for b in req.blocks[2:5]] == ["What do I owe?", "Quickly.", "Looking."]
    assert req.breakpoints == (Breakpoint(0), Breakpoint(1), Breakpoint(6, 3600.0))
    assert req.auto_cache_ttl_s == 300.0 and req.messages[3]["role"] == "tool"


def test_blocks_derived_from_other_formats_follow_the_same_order() -> None:
    req = parse_chat_completions(chat())
    kept = parse_anthropic(anthropic())
    assert [b.section for b in derived_blocks(req)] == ["tools", "system", *["messages"] * 4]
    # the joined user text is one block here, two in the Anthropic body; tools, system and the rest agree
    assert derived_blocks(req)[:2] == kept.blocks[:2] and derived_blocks(req)[3:] == kept.blocks[4:]


def test_openai_cache_key_and_retention_are_kept() -> None:
    body = chat() | {"prompt_cache_key": "user-7", "prompt_cache_retention": "24h"}
    req = parse_chat_completions(body)
    assert (req.cache_key, req.cache_retention) == ("user-7", "24h")
    r = parse_responses(responses() | {"prompt_cache_retention": "in-memory"})
    assert (r.cache_key, r.cache_retention) == (None, "in_memory")
    with pytest.raises(FieldError, match="prompt_cache_retention: expected in_memory or 24h"):
        parse_chat_completions(chat() | {"prompt_cache_retention": "1w"})


def test_anthropic_refuses_a_fifth_breakpoint() -> None:
    body = anthropic()
    body["messages"][0]["content"][0]["cache_control"] = {"type": "ephemeral"}
    body["messages"][0]["content"][1]["cache_control"] = {"type": "ephemeral"}
    body["cache_control"] = {"type": "ephemeral"}
    with pytest.raises(FieldError, match="5 breakpoints; Anthropic allows at most 4"):
        parse_anthropic(body)


@pytest.mark.parametrize(
    ("parse", "body", "edit", "field"),
    [
        (
            parse_chat_completions,
            chat,
            lambda b: b["messages"][1]["content"].append({"type": "image_url"}),
            r"messages\[1\]\.content\[2\]\.type: 'image_url' parts are not supported",
        ),
        (
            parse_chat_completions,
            chat,
            lambda b: b["messages"][0].update(role="wizard"),
            r"messages\[0\]\.role",
        ),
        (
            parse_chat_completions,
            chat,
            lambda b: b["messages"][2]["tool_calls"][0]["function"].pop("name"),
            r"messages\[2\]\.tool_calls\[0\]\.function\.name: expected a string",
        ),
        (
            parse_responses,
            responses,
            lambda b: b["input"].append({"type": "file_search_call"}),
            r"input\[5\]\.type",
        ),
        (parse_responses, responses, lambda b: b.update(previous_response_id="r1"), "previous_response_id"),
        (
            parse_anthropic,
            anthropic,
            lambda b: b["messages"][0]["content"].append({"type": "image"}),
            r"messages\[0\]\.content\[2\]\.type: 'image' blocks",
        ),
        (
            parse_anthropic,
            anthropic,
            lambda b: b["system"][0].update(cache_control={"ttl": "2h"}),
            r"system\[0\]\.cache_control\.ttl",
        ),
        (
            parse_anthropic,
            anthropic,
            lambda b: b["tools"][0].pop("input_schema"),
            r"tools\[0\]\.input_schema",
        ),
        (
            parse_anthropic,
            anthropic,
            lambda b: (b.pop("system"), b.update(messages=[{"role": "user", "content": []}])),
            r"messages: no message has content",
        ),
    ],
)
def test_malformed_input_names_the_field(parse, body, edit, field: str) -> None:
    b = body()
    edit(b)
    with pytest.raises(FieldError, match=field):
        parse(b)
