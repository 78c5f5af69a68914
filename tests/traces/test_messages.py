"""Chat messages as users hand them in: validation, request JSON split, tool calls with OpenAI's string
arguments parsed."""

from __future__ import annotations

import pytest

from engine.errors import PromptError
from engine.traces.messages import parse_arguments, split_request, tool_call, validate_messages

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
    assert tool_call("c1", "f", '{"a": 1}') == {
        "id": "c1",
        "type": "function",
        "function": {"name": "f", "arguments": {"a": 1}},
    }
    assert parse_arguments("not json") == "not json" and parse_arguments({"a": 1}) == {"a": 1}
