"""What a stream may show: never text the final answer cuts (a stop sequence) or turns into a call."""

from __future__ import annotations

from engine.prompts.chat import HERMES, LLAMA3_JSON
from engine.serve.streaming import TextStream, sse
from engine.serve.tool_calls import Parsed, parse_tool_calls


def run(pieces: list[str], stop: list[str], tools: bool | str, final_text: str) -> tuple[str, str]:
    """(text sent while streaming, all text sent) for engine deltas `pieces` and the engine's final text."""
    fmt = (HERMES if tools is True else tools) or None
    stream = TextStream(stop, fmt)
    during = "".join(stream.feed(p) for p in pieces)
    parsed = parse_tool_calls(final_text, fmt) if fmt else Parsed(final_text, [])
    return during, during + stream.finish(parsed)


def test_a_stop_sequence_is_never_shown() -> None:
    pieces = ["Hello", " wor", "ld EN", "D more"]
    during, total = run(pieces, ["END"], False, "Hello world ")
    assert "E" not in during and total == "Hello world "
    during, total = run(["ab", "c"], ["xyz"], False, "abc")
    assert total == "abc"


def test_a_tool_call_is_held_back_and_plain_text_is_not() -> None:
    call = '<tool_call>{"name": "f", "arguments": {}}</tool_call>'
    pieces = ["I will", " call.\n<tool", "_call>", call[11:]]
    during, total = run(pieces, [], True, "I will call.\n" + call)
    assert during == "I will call." and total == "I will call."
    broken = "I will call.\n<tool_call>{oops}</tool_call>"
    during, total = run(["I will call.\n", "<tool_call>{oops}", "</tool_call>"], [], True, broken)
    assert total == broken  # does not parse: all of it is text, sent at the end
    during, total = run(["Plain ", "text\n"], [], True, "Plain text\n")
    assert during == "Plain text" and total == "Plain text\n"
    llama = '{"name": "f", "parameters": {}}'
    during, total = run(["{", '"name', llama[6:]], [], LLAMA3_JSON, llama)
    assert during == total == ""  # a Llama 3 call is never shown as text
    during, total = run(["{", "} is", " empty"], [], LLAMA3_JSON, "{} is empty")
    assert during == total == "{} is empty"


def test_sse_lines() -> None:
    assert sse({"a": 1}) == 'data: {"a": 1}\n\n'
    assert sse("[DONE]") == "data: [DONE]\n\n"
    assert sse({"type": "ping"}, "ping") == 'event: ping\ndata: {"type": "ping"}\n\n'
