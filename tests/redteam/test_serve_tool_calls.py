"""Tool calls: JSON nested thousands deep or with a 5,000-digit integer, in the model's own output (the
Hermes, generic and Llama-3 parsers) and in the calls a client sends back (Chat and Responses); the streamed
parser's cost on an unterminated 200,000-character name and on whitespace floods, linear in the text."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from engine.prompts.chat import GENERIC, HERMES, LLAMA3_JSON
from engine.serve.tool_calls import CallStart, ToolCallParser, parse_tool_calls
from tests.redteam.conftest import MODEL
from tests.redteam.hostile import clear, post

DEEP = "[" * 5000 + "]" * 5000
HUGE = "9" * 5000
VALUES = {
    "5000 deep": DEEP,
    "900 deep": "[" * 900 + "]" * 900,
    "5000 digits": HUGE,
    "lone surrogate": '"\\ud800"',
}


def _output(fmt: str, value: str) -> str:
    call = f'{{"name": "f", "arguments": {{"x": {value}}}}}'
    return call if fmt == LLAMA3_JSON else f"<tool_call>{call}</tool_call>"


@pytest.mark.parametrize("fmt", [HERMES, GENERIC, LLAMA3_JSON])
@pytest.mark.parametrize("value", list(VALUES.values()), ids=list(VALUES))
def test_the_models_own_deep_or_huge_arguments(fmt: str, value: str) -> None:
    text = _output(fmt, value)
    for parsed in (parse_tool_calls(text, fmt), _streamed(text, fmt)):
        (call,) = parsed.calls
        assert call.name == "f" and call.input == {}  # beyond what is read: reported, not a traceback
        assert parsed.problems[0]["problem"] == "arguments are not a JSON object"
    name = parse_tool_calls('<tool_call>{"name": "f\\ud800", "arguments": {}}</tool_call>', fmt)
    assert all("\ud800" not in c.name for c in name.calls)


def _streamed(text: str, fmt: str, step: int = 7):  # type: ignore[no-untyped-def]
    parser = ToolCallParser.for_format(fmt)
    for i in range(0, len(text), step):
        parser.feed(text[i : i + step])
    return parser.finish()[1]


def _cost(make: Callable[[int], str], fmt: str, n: int, step: int, limit: float = 60.0) -> float:
    """CPU seconds to stream `make(n)` through the parser `step` characters at a time (best of three);
    infinite once a run passes `limit` (a quadratic parser is stopped there, not waited for)."""
    text, best = make(n), float("inf")
    for _ in range(3):
        start = time.process_time()
        parser = ToolCallParser.for_format(fmt)
        for i in range(0, len(text), step):
            parser.feed(text[i : i + step])
            if i % 1024 == 0 and time.process_time() - start > limit:
                return float("inf")
        parser.finish()
        best = min(best, time.process_time() - start)
    return best


FLOODS: dict[str, tuple[str, Callable[[int], str]]] = {
    "unterminated name": (HERMES, lambda n: '<tool_call>{"name": "' + "a" * n),
    "unterminated name, llama": (LLAMA3_JSON, lambda n: '{"name": "' + "a" * n),
    "escaped quotes in a name": (HERMES, lambda n: '<tool_call>{"name": "' + '\\"' * (n // 2)),
    "whitespace before a call": (HERMES, lambda n: "text" + " " * n + "<tool_call>"),
    "whitespace inside a call": (HERMES, lambda n: "<tool_call>" + " " * n),
    "whitespace after the name": (HERMES, lambda n: '<tool_call>{"name": "f"' + " " * n),
    "a key other than arguments": (HERMES, lambda n: '<tool_call>{"name": "f", "x": "' + "a" * n),
    "whitespace leading, llama": (LLAMA3_JSON, lambda n: " " * n),
    "whitespace after the brace, llama": (LLAMA3_JSON, lambda n: "{" + " " * n),
    "whitespace between calls, llama": (LLAMA3_JSON, lambda n: '{"name": "f"};' + " " * n),
    "plain text": (HERMES, lambda n: "word " * (n // 5)),
}


@pytest.mark.parametrize("case", list(FLOODS))
def test_the_streamed_parser_is_linear(case: str) -> None:
    fmt, make = FLOODS[case]
    small = _cost(make, fmt, 20_000, 2)
    large = _cost(make, fmt, 80_000, 2, limit=10 * max(small, 1e-3))
    # linear: 4x the text costs ~4x, within 10x on a loaded machine (quadratic: 16x; main's parser
    # streamed a 200k-character name in 288 s against 0.07 s parsed whole)
    assert large < 10 * max(small, 1e-3), (small, large)


def test_an_unterminated_name_streamed_is_still_read_whole() -> None:
    parser = ToolCallParser.for_format(HERMES)
    text = '<tool_call>{"name": "' + "a" * 20_000 + '", "arguments": {"x": 1}}</tool_call>'
    pieces = [p for i in range(0, len(text), 3) for p in parser.feed(text[i : i + 3])]
    assert [p.name for p in pieces if isinstance(p, CallStart)] == ["a" * 20_000]
    assert parser.finish()[1].calls[0].arguments == '{"x": 1}'


def _chat_with(arguments: str) -> dict:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": arguments}}
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "done"},
    ]
    return {"model": MODEL, "messages": messages, "max_tokens": 2}


def _responses_with(arguments: str) -> dict:
    items = [
        {"type": "message", "role": "user", "content": "go"},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": arguments},
        {"type": "function_call_output", "call_id": "c1", "output": "done"},
    ]
    return {"model": MODEL, "input": items, "max_output_tokens": 2}


@pytest.mark.parametrize("value", list(VALUES.values()), ids=list(VALUES))
def test_client_sent_arguments_deep_or_huge(open_server, value: str) -> None:  # type: ignore[no-untyped-def]
    arguments = f'{{"x": {value}}}'
    chat = post(open_server.url, "/v1/chat/completions", _chat_with(arguments))
    clear(chat, 400, "messages[1].tool_calls[0].function.arguments")
    responses = post(open_server.url, "/v1/responses", _responses_with(arguments))
    clear(responses, 400, "input[1].arguments")


def test_client_sent_arguments_within_bounds_are_answered(open_server) -> None:  # type: ignore[no-untyped-def]
    arguments = '{"x": ' + "[" * 200 + "]" * 200 + ', "n": ' + "9" * 4000 + "}"
    assert post(open_server.url, "/v1/chat/completions", _chat_with(arguments)).status == 200
    assert post(open_server.url, "/v1/responses", _responses_with(arguments)).status == 200
