"""OpenAI request bodies: what is read, what is refused by name, where the session comes from."""

from __future__ import annotations

from typing import Any

import pytest

from engine.serve.errors import APIError
from engine.serve.openai_request import parse_openai

NAMES = ["m"]
BASE: dict[str, Any] = {
    "model": "m",
    "messages": [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "hi"}],
}


def refused(changes: dict[str, Any], headers: dict[str, str] | None = None) -> APIError:
    with pytest.raises(APIError) as e:
        parse_openai(BASE | changes, headers or {}, NAMES)
    return e.value


def test_an_assistant_message_with_tool_calls_needs_no_content() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "4"},
    ]
    assert parse_openai(BASE | {"messages": messages}, {}, NAMES).messages[-1]["role"] == "tool"


def test_a_body_is_read() -> None:
    req = parse_openai(
        BASE
        | {
            "max_completion_tokens": 5,
            "temperature": 0,
            "stop": "x",
            "seed": 3,
            "user": "u",
            "n": 1,
            "store": False,
        },
        {},
        NAMES,
    )
    assert req.messages[0] == {"role": "system", "content": "Be brief."}  # developer is system
    assert (req.max_tokens, req.temperature, req.stop, req.seed) == (5, 0.0, ["x"], 3)
    assert (req.client.session, req.client.source, req.parse_tools, req.stream) == ("u", "user", False, False)
    assert parse_openai(BASE, {"x-session-id": "h"}, NAMES).client.source == "header"
    defaults = parse_openai(BASE, {}, NAMES)
    assert (defaults.temperature, defaults.top_p, defaults.max_tokens, defaults.client.session) == (
        1.0,
        1.0,
        None,
        None,
    )
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    assert parse_openai(BASE | {"tools": tools}, {}, NAMES).parse_tools
    assert not parse_openai(BASE | {"tools": tools, "tool_choice": "none"}, {}, NAMES).parse_tools


def test_what_the_agents_sdk_sends_is_accepted_and_noted() -> None:
    req = parse_openai(BASE | {"reasoning_effort": "none", "verbosity": "low"}, {}, NAMES)
    assert set(req.notes["not_applied"]) == {"reasoning_effort", "verbosity"}
    assert parse_openai(BASE, {}, NAMES).notes == {}
    assert parse_openai(BASE | {"seed": 2**64 - 1}, {}, NAMES).seed == 2**64 - 1


def test_continue_final_message_continues_the_assistant() -> None:
    prefill = BASE["messages"] + [{"role": "assistant", "content": "The answer is"}]
    req = parse_openai(BASE | {"messages": prefill, "continue_final_message": True}, {}, NAMES)
    assert req.continue_final and not parse_openai(BASE | {"messages": prefill}, {}, NAMES).continue_final


@pytest.mark.parametrize(
    ("changes", "param", "status"),
    [
        ({"model": "other"}, "model", 404),
        ({"n": 3}, "n", 400),
        ({"n": True}, "n", 400),
        ({"logit_bias": {"5": 10}}, "logit_bias", 400),
        ({"response_format": {"type": "json_object"}}, "response_format", 400),
        ({"presence_penalty": 0.5}, "presence_penalty", 400),
        ({"logprobs": True}, "logprobs", 400),
        ({"audio": {"voice": "x"}}, "audio", 400),
        ({"tool_choice": "required"}, "tool_choice", 400),
        ({"tool_choice": {"type": "function", "function": {"name": "f"}}}, "tool_choice", 400),
        ({"max_tokens": 0}, "max_tokens", 400),
        ({"max_tokens": 5, "max_completion_tokens": 6}, "max_tokens", 400),
        ({"temperature": 2.5}, "temperature", 400),
        ({"top_p": 0}, "top_p", 400),
        ({"seed": -1}, "seed", 400),
        ({"seed": 2**64}, "seed", 400),
        ({"seed": 10**5000}, "seed", 400),
        ({"continue_final_message": True}, "continue_final_message", 400),  # the last message is the user's
        ({"stop": ["a", "b", "c", "d", "e"]}, "stop", 400),
        ({"stop": [""]}, "stop", 400),
        ({"stream_options": {"include_usage": True}}, "stream_options", 400),
        ({"stream": True, "stream_options": {"other": 1}}, "stream_options.other", 400),
        ({"stream": "yes"}, "stream", 400),
        ({"messages": "hi"}, "messages", 400),
        ({"messages": []}, "messages", 400),
        ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role", 400),
        ({"messages": [{"role": "user"}]}, "messages[0].content", 400),
        ({"messages": [{"role": "user", "content": None}]}, "messages[0].content", 400),
        (
            {"messages": [{"role": "user", "content": "x"}, {"role": "tool", "content": "4"}]},
            "messages[1].tool_call_id",
            400,
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "input_audio"}]}]},
            "messages[0].content[0].type",
            400,
        ),
        ({"tools": [{"type": "function"}]}, "tools[0].function", 400),
        ({"unknown_field": 1}, "unknown_field", 400),
    ],
)
def test_refused_by_name(changes: dict[str, Any], param: str, status: int) -> None:
    error = refused(changes)
    assert (error.param, error.status) == (param, status)
    assert error.openai_body()["error"]["param"] == param
