"""Tool calls read incrementally in each family's format: the pieces a stream sends add up to the final
answer whichever way the output is split, a call's name comes first, and what does not parse stays text
and is reported."""

from __future__ import annotations

import pytest

from engine.prompts.chat import GENERIC, HERMES, LLAMA3_JSON, tool_format
from engine.serve.tool_calls import (
    CallArguments,
    CallStart,
    Parsed,
    Text,
    ToolCall,
    ToolCallParser,
    parse_tool_calls,
)

WEATHER = '{"name": "get_weather", "arguments": {"city": "Paris"}}'


def fed(text: str, fmt: str, step: int) -> tuple[list, Parsed]:
    """Every piece of `text` fed `step` characters at a time, checked against the whole text's parse."""
    parser = ToolCallParser.for_format(fmt)
    pieces = [p for i in range(0, len(text), step) for p in parser.feed(text[i : i + step])]
    more, parsed = parser.finish()
    pieces += more
    assert parsed == parse_tool_calls(text, fmt)
    shown = "".join(p.text for p in pieces if isinstance(p, Text))
    assert shown == (parsed.content or "")
    assert [p.name for p in pieces if isinstance(p, CallStart)] == [c.name for c in parsed.calls]
    for i, call in enumerate(parsed.calls):
        fragments = [p.fragment for p in pieces if isinstance(p, CallArguments) and p.index == i]
        assert "".join(fragments) == call.arguments
    return pieces, parsed


def parse(text: str, fmt: str = HERMES) -> Parsed:
    results = {fed(text, fmt, step)[1] == fed(text, fmt, 1)[1] for step in (1, 2, 3, 5, 8, len(text) + 1)}
    assert results == {True}
    return parse_tool_calls(text, fmt)


def test_hermes_calls_and_the_text_around_them() -> None:
    text = f"Let me check.\n<tool_call>\n{WEATHER}\n</tool_call>\n"
    text += '<tool_call>{"name": "ping", "arguments": "{\\"host\\": \\"a\\"}"}</tool_call>'
    parsed = parse(text)
    assert parsed.calls == [ToolCall("get_weather", '{"city": "Paris"}'), ToolCall("ping", '{"host": "a"}')]
    assert parsed.content == "Let me check." and parsed.problems == []
    assert parsed.calls[0].input == {"city": "Paris"}
    assert parse(f"<tool_call>{WEATHER}</tool_call>\n").content is None
    assert parse(f"Sure. \n<tool_call>{WEATHER}</tool_call> done").content == "Sure. done"
    assert parse('<tool_call>{"arguments": {"b": 2}, "name": "f"}</tool_call>').calls == [
        ToolCall("f", '{"b": 2}')
    ]
    assert parse('<tool_call>{"name": "f"}</tool_call>').calls == [ToolCall("f", "{}")]


def test_the_name_comes_first_then_the_arguments_as_they_form() -> None:
    pieces, _ = fed(f"<tool_call>\n{WEATHER}\n</tool_call>", HERMES, 1)
    assert pieces[0] == CallStart(0, "get_weather")
    fragments = [p.fragment for p in pieces if isinstance(p, CallArguments)]
    assert len(fragments) == len('{"city": "Paris"}')  # one per character fed
    tricky = '<tool_call>{"name": "f", "arguments": {"a": "x}\\"{", "b": [1, {"c": "]"}]}}</tool_call>'
    assert parse(tricky).calls[0].input == {"a": 'x}"{', "b": [1, {"c": "]"}]}


def test_what_holds_no_call_stays_text_and_is_reported() -> None:
    for text in ("<tool_call>{not json}</tool_call>", '<tool_call>{"arguments": {}}</tool_call>'):
        parsed = parse(f"Hi {text}")
        assert parsed.calls == [] and parsed.content == f"Hi {text}"
        assert parsed.problems[0]["problem"] == "not a tool call"
    for text in ("plain answer  \n", "", "a <tool", "{}"):
        assert parse(text) == Parsed(text, [])


def test_a_call_whose_closing_tag_never_came_is_a_call_and_is_reported() -> None:
    parsed = parse(f'<tool_call>{WEATHER}</tool_call> <tool_call>{{"name": "g", "arguments": {{"x": 1}}}}\n')
    assert [c.name for c in parsed.calls] == ["get_weather", "g"] and parsed.calls[1].input == {"x": 1}
    assert parsed.problems == [
        {"call": 1, "problem": "unclosed", "text": '{"name": "g", "arguments": {"x": 1}}\n'}
    ]
    cut = parse('<tool_call>{"name": "g", "arguments": {"x": ')  # cut off by max_tokens
    assert cut.calls == [ToolCall("g", '{"x": ')] and cut.calls[0].input == {}
    assert cut.problems[0]["problem"] == "unclosed"
    said = parse('Sure.\n <tool_call>{"name": "g", "arguments": {}}</tool_call>')
    assert said.raw == ['\n <tool_call>{"name": "g", "arguments": {}}</tool_call>']  # as written, space too
    odd = parse('<tool_call>{"name": "f", "arguments": [1]}</tool_call>')
    assert odd.calls == [ToolCall("f", "[1]")]
    assert odd.problems[0]["problem"] == "arguments are not a JSON object"


def test_llama3_json_calls_at_the_start_of_the_output() -> None:
    one = parse('{"name": "get_weather", "parameters": {"city": "Paris"}}', LLAMA3_JSON)
    raw = '{"name": "get_weather", "parameters": {"city": "Paris"}}'
    assert one == Parsed(None, [ToolCall("get_weather", '{"city": "Paris"}')], [], [raw])
    two = parse(' {"name": "a", "parameters": {}}; {"name": "b", "parameters": {"x": [1]}}', LLAMA3_JSON)
    assert [(c.name, c.input) for c in two.calls] == [("a", {}), ("b", {"x": [1]})]
    for text in ('Hello {"name": "x"}', '{"type": "function"}', "{", "\n\n", "The answer is 4."):
        assert parse(text, LLAMA3_JSON) == Parsed(text, [])
    cut = parse('{"name": "f", "parameters": {"a"', LLAMA3_JSON)
    assert cut.calls[0].name == "f" and cut.problems[0]["problem"] == "unclosed"


@pytest.mark.parametrize(
    ("template", "fmt"),
    [
        ("{% for m in messages %}{{ m.content }}{% endfor %}", GENERIC),
        ("{% if tools %}<tool_call>{% endif %}", HERMES),
        (
            '{% if tools %}{"name": function name, "parameters": dictionary of argument name{% endif %}',
            LLAMA3_JSON,
        ),
        ("{% if tools %}[TOOL_CALLS]{% endif %}", GENERIC),  # a format not parsed here: the generic one
    ],
)
def test_the_format_follows_the_template(template: str, fmt: str) -> None:
    class Tokenizer:
        chat_template = template

    assert tool_format(Tokenizer()) == fmt  # type: ignore[arg-type]
