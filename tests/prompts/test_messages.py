"""Chat messages as users hand them in: validation, request JSON split, tool calls with OpenAI's string
arguments parsed."""

from __future__ import annotations

import pytest

from engine.errors import PromptError
from engine.prompts.messages import (
    parse_arguments,
    split_request,
    tool_call,
    validate_messages,
    validate_tools,
)

USER = {"role": "user", "content": "hi"}


@pytest.mark.parametrize(
    ("messages", "message"),
    [
        ([], "empty prompt"),
        ([{"role": "wizard", "content": "x"}], "message 0"),
        ([{"role": "user"}], "no text"),
        ({"role": "user", "content": "hi"}, "messages must be a list of chat messages, got dict"),
        ([{"role": "user", "content": 7}], "message 0 content must be text or a list of text parts, got int"),
        ([{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}], "part 0 is 'image_url'"),
        ([{"role": "user", "content": "\udc80"}], "message 0 content holds a lone surrogate"),
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


def test_multi_part_text_content_is_joined_by_newlines() -> None:
    parts = [{"type": "text", "text": "What is"}, {"type": "text", "text": "the capital?"}]
    system = {"role": "system", "content": [{"type": "text", "text": "Be terse."}]}
    out = validate_messages([system, {"role": "user", "content": parts}, USER])
    assert out == [
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": "What is\nthe capital?"},
        USER,
    ]
    assert out[2] is USER and parts[0] == {
        "type": "text",
        "text": "What is",
    }  # nothing of the caller's changed


@pytest.mark.parametrize(
    ("tools", "message"), [("lookup", "got str"), (["x"], "got a list holding a non-dict")]
)
def test_tools_must_be_a_list_of_dicts(tools: object, message: str) -> None:
    with pytest.raises(PromptError, match=f"tools must be a list of tool definitions \\(dicts\\), {message}"):
        validate_tools(tools)
    assert validate_tools(None) is None and validate_tools(({"name": "f"},)) == [{"name": "f"}]
