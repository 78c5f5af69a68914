"""The three input formats parse to the same normalized request; malformed input names its field."""

from __future__ import annotations

from typing import Any

import pytest

from engine.traces.anthropic_messages import parse_anthropic
from engine.traces.openai_chat import parse_chat_completions
from engine.traces.request import TOOLS, Breakpoint, FieldError
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


def test_anthropic_breakpoints_land_on_their_messages() -> None:
    body = anthropic()
    body["tools"][0]["cache_control"] = {"type": "ephemeral"}
    body["cache_control"] = {"type": "ephemeral"}
    req = parse_anthropic(body)
    assert req.breakpoints == (Breakpoint(TOOLS), Breakpoint(0), Breakpoint(3, 3600.0))
    assert req.auto_cache_ttl_s == 300.0 and req.messages[3]["role"] == "tool"


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
            lambda b: b["input"].append({"type": "web_search_call"}),
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
    ],
)
def test_malformed_input_names_the_field(parse, body, edit, field: str) -> None:
    b = body()
    edit(b)
    with pytest.raises(FieldError, match=field):
        parse(b)
