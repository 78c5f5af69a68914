"""Anthropic request bodies: what is read, what is refused by name, where the session comes from."""

from __future__ import annotations

from typing import Any

import pytest

from engine.serve.anthropic_request import parse_messages
from engine.serve.errors import APIError

NAMES = ["m"]
BASE: dict[str, Any] = {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}


def test_a_body_is_read() -> None:
    body = BASE | {
        "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "stop_sequences": ["END"],
        "metadata": {"user_id": "u"},
        "tools": [{"name": "f", "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "auto"},
        "thinking": {"type": "disabled"},
    }
    req = parse_messages(body, {}, NAMES)
    assert req.messages[0] == {"role": "system", "content": "Be brief."}
    assert (req.max_tokens, req.stop, req.client.session, req.client.source) == (
        8,
        ["END"],
        "u",
        "metadata.user_id",
    )
    assert req.parse_tools and req.tools[0]["function"]["name"] == "f" and req.include_usage
    assert not parse_messages(body | {"tool_choice": {"type": "none"}}, {}, NAMES).parse_tools


def test_claude_codes_own_fields_are_accepted_and_noted() -> None:
    body = BASE | {
        "thinking": {"type": "adaptive"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "output_config": {"effort": "high", "format": {"type": "json_schema", "schema": {}}},
    }
    notes = parse_messages(body, {}, NAMES).notes["not_applied"]
    assert set(notes) == {"thinking", "context_management", "output_config.effort", "output_config.format"}
    enabled = parse_messages(BASE | {"thinking": {"type": "enabled", "budget_tokens": 1024}}, {}, NAMES)
    assert "thinking" in enabled.notes["not_applied"]
    assert parse_messages(BASE | {"thinking": {"type": "disabled"}}, {}, NAMES).notes == {}


def test_a_prefill_is_continued() -> None:
    prefill = [
        *BASE["messages"],
        {"role": "assistant", "content": [{"type": "text", "text": "The answer is"}]},
    ]
    assert parse_messages(BASE | {"messages": prefill}, {}, NAMES).continue_final
    assert not parse_messages(BASE, {}, NAMES).continue_final


def test_a_system_message_mid_conversation_stays_where_it_is() -> None:
    turns = [
        {"role": "user", "content": "hi"},
        {"role": "system", "content": [{"type": "text", "text": "Agents: a, b."}]},
        {"role": "user", "content": "go"},
    ]
    req = parse_messages(BASE | {"messages": turns}, {}, NAMES)
    assert [m["role"] for m in req.messages] == ["user", "system", "user"]
    assert req.messages[1]["content"] == "Agents: a, b."


@pytest.mark.parametrize(
    ("changes", "param", "status"),
    [
        ({"model": "claude"}, "model", 404),
        ({"max_tokens": None}, "max_tokens", 400),
        ({"top_k": 3}, "top_k", 400),
        ({"temperature": 1.5}, "temperature", 400),
        ({"tool_choice": {"type": "any"}}, "tool_choice.type", 400),
        ({"thinking": {"type": "sometimes"}}, "thinking.type", 400),
        ({"thinking": {"type": "enabled", "budget_tokens": "lots"}}, "thinking.budget_tokens", 400),
        ({"thinking": {"type": "enabled"}}, "thinking.budget_tokens", 400),  # was accepted
        ({"metadata": {"user_id": 5}}, "metadata.user_id", 400),  # was accepted, as session "5"
        ({"output_config": "high"}, "output_config", 400),
        (
            {"tool_choice": {"type": "auto", "disable_parallel_tool_use": True}},
            "tool_choice.disable_parallel_tool_use",
            400,
        ),
        ({"metadata": {"user_id": "u", "other": 1}}, "metadata.other", 400),
        ({"stop_sequences": "END"}, "stop_sequences", 400),  # a list, per the API
        (
            {"messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]},
            "messages[0].content[0].type",
            400,
        ),
        ({"messages": [{"role": "tool", "content": "x"}]}, "messages[0].role", 400),
        ({"messages": [{"role": "user", "content": []}]}, "messages", 400),  # was a 500 (IndexError)
        ({"tools": [{"name": "web", "type": "web_search_20250305"}]}, "tools[0].input_schema", 400),
        ({"container": "c"}, "container", 400),
    ],
)
def test_refused_by_name(changes: dict[str, Any], param: str, status: int) -> None:
    with pytest.raises(APIError) as e:
        parse_messages(BASE | changes, {}, NAMES)
    assert (e.value.param, e.value.status) == (param, status)
    body = e.value.anthropic_body()
    assert body["type"] == "error" and body["error"]["message"].startswith(param)
