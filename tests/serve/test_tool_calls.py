"""Hermes tool calls parsed from model output, all or nothing: what does not parse stays text."""

from __future__ import annotations

from engine.serve.tool_calls import ToolCall, content_before_calls, parse_tool_calls


def test_calls_and_the_text_around_them() -> None:
    text = (
        'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
    )
    text += '<tool_call>{"name": "ping", "arguments": "{\\"host\\": \\"a\\"}"}</tool_call>'
    parsed = parse_tool_calls(text)
    assert parsed.calls == [ToolCall("get_weather", {"city": "Paris"}), ToolCall("ping", {"host": "a"})]
    assert parsed.content == "Let me check."
    assert parse_tool_calls('<tool_call>{"name": "f", "arguments": {}}</tool_call>\n').content is None


def test_output_that_does_not_parse_stays_text() -> None:
    for text in (
        "<tool_call>{not json}</tool_call>",
        '<tool_call>{"arguments": {}}</tool_call>',  # no name
        '<tool_call>{"name": "f", "arguments": [1]}</tool_call>',  # arguments not an object
        '<tool_call>{"name": "f", "arguments": {}}</tool_call> <tool_call>{"name": "g"',  # cut off
        "plain answer",
        "",
    ):
        parsed = parse_tool_calls(text)
        assert parsed.calls == [] and parsed.content == text


def test_what_a_stream_shows_is_the_start_of_the_content() -> None:
    text = '  Sure thing. \n<tool_call>{"name": "f", "arguments": {}}</tool_call> done'
    assert content_before_calls(text) == "  Sure thing."
    assert parse_tool_calls(text).content.startswith(content_before_calls(text))
