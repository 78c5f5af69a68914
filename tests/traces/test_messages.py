"""Chat messages as users hand them in: validation, request JSON split, OpenAI tool arguments parsed."""

from __future__ import annotations

import pytest

from engine.errors import PromptError
from engine.traces.messages import parse_tool_arguments, split_request, validate_messages

USER = {"role": "user", "content": "hi"}


@pytest.mark.parametrize(
    ("messages", "message"),
    [
        ([], "empty prompt"),
        ([{"role": "wizard", "content": "x"}], "message 0"),
        ([{"role": "user"}], "no text"),
    ],
)
def test_bad_messages_are_refused_by_index(messages: list, message: str) -> None:
    with pytest.raises(PromptError, match=message):
        validate_messages(messages)


def test_a_request_is_a_message_list_or_an_object_with_tools() -> None:
    tools = [{"type": "function", "function": {"name": "f"}}]
    assert split_request([USER]) == ([USER], None)
    assert split_request({"messages": [USER], "tools": tools}) == ([USER], tools)
    assert split_request({"tools": tools}) == (None, tools)


def test_string_arguments_become_objects_and_non_json_stays_text() -> None:
    calls = [
        {"type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}},
        {"name": "g", "arguments": "not json"},
    ]
    parsed = parse_tool_arguments({"role": "assistant", "content": "", "tool_calls": calls})["tool_calls"]
    assert parsed[0]["function"]["arguments"] == {"a": 1} and parsed[1]["arguments"] == "not json"
    assert calls[0]["function"]["arguments"] == '{"a": 1}'  # the caller's message is not changed
    assert parse_tool_arguments(USER) is USER
