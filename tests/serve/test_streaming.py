"""What a stream may send: never text the final answer cuts (a stop sequence) or turns into a call; a call's
name as soon as it is read, then its argument fragments; and all of it adds up to the final answer."""

from __future__ import annotations

import itertools

from engine.prompts.chat import HERMES, LLAMA3_JSON
from engine.serve.streaming import AnswerStream, sse
from engine.serve.tool_calls import CallArguments, CallStart, Piece, Text, parse_tool_calls


def text(pieces: list[Piece]) -> str:
    return "".join(p.text for p in pieces if isinstance(p, Text))


def run(
    deltas: list[str], stop: list[str], tools: bool | str, final_text: str
) -> tuple[list[Piece], list[Piece]]:
    """(pieces sent while streaming, all pieces sent) for engine deltas and the engine's final text."""
    fmt = (HERMES if tools is True else tools) or None
    stream = AnswerStream(stop, fmt)
    during = [p for d in deltas for p in stream.feed(d)]
    return during, during + stream.finish(final_text)


def test_a_stop_sequence_is_never_shown() -> None:
    during, total = run(["Hello", " wor", "ld EN", "D more"], ["END"], False, "Hello world ")
    assert "E" not in text(during) and text(total) == "Hello world "
    _, total = run(["ab", "c"], ["xyz"], False, "abc")
    assert text(total) == "abc"


def test_a_call_streams_as_it_forms() -> None:
    """The name as soon as it is read, argument fragments as they come; all of it the parsed call."""
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par'
    final = "I will call.\n" + call + 'is"}}\n</tool_call>'
    stream = AnswerStream([], HERMES)
    assert stream.feed("I will") == [Text("I will")]
    assert text(stream.feed(" call.\n<tool")) == " call."
    named = stream.feed(call[5:])
    assert named[0] == CallStart(0, "get_weather") and text(named) == ""
    assert "".join(p.fragment for p in named[1:] if isinstance(p, CallArguments)) == '{"city": "Par'
    rest = stream.feed('is"}}\n</tool_call>') + stream.finish(final)
    arguments = "".join(p.fragment for p in named + rest if isinstance(p, CallArguments))
    parsed = parse_tool_calls(final, HERMES)
    assert [(c.name, c.arguments) for c in parsed.calls] == [("get_weather", arguments)]
    assert text(rest) == "" and parsed.content == "I will call."


def test_what_is_not_a_call_is_text_once_it_is_known() -> None:
    broken = "I will call.\n<tool_call>{oops}</tool_call>"
    stream = AnswerStream([], HERMES)
    assert text(stream.feed("I will call.\n") + stream.feed("<tool_call>{oops}")) == "I will call."
    assert text(stream.feed("</tool_call>")) == "\n<tool_call>{oops}</tool_call>"  # held until it closed
    assert stream.finish(broken) == []
    during, total = run(["Plain ", "text\n"], [], True, "Plain text\n")
    assert text(during) == "Plain text" and text(total) == "Plain text\n"
    llama = '{"name": "f", "parameters": {}}'
    during, total = run(["{", '"name', llama[6:]], [], LLAMA3_JSON, llama)
    assert text(total) == "" and CallStart(0, "f") in during  # a Llama 3 call is never text
    _, total = run(["{", "} is", " empty"], [], LLAMA3_JSON, "{} is empty")
    assert text(total) == "{} is empty"


def test_sse_lines() -> None:
    assert sse({"a": 1}) == 'data: {"a": 1}\n\n'
    assert sse("[DONE]") == "data: [DONE]\n\n"
    assert sse({"type": "ping"}, "ping") == 'event: ping\ndata: {"type": "ping"}\n\n'


class Counted(str):
    """A delta that counts the characters read by iterating over it (as the stop matcher reads text)."""

    read = 0

    def __iter__(self):  # noqa: ANN204
        Counted.read += len(self)
        return super().__iter__()


def test_a_long_reply_streams_with_each_character_read_once() -> None:
    """A 100,000-character reply in deltas of 1 to 3 characters, a stop sequence's prefix open all along:
    the stop matcher reads each character once per stop sequence, and what the stream holds back (all it
    keeps and copies again) stays shorter than the longest stop sequence: work linear in the reply (a scan,
    or a copy, of the whole reply per delta would touch ~1.7e9 characters)."""
    stop, reply = ["</stop>", "abababX"], "ab" * 50_000
    stream, sizes = AnswerStream(stop, None), itertools.cycle([1, 2, 3])
    Counted.read, held, sent, i = 0, 0, 0, 0
    while i < len(reply):
        n = next(sizes)
        sent += len(text(stream.feed(Counted(reply[i : i + n]))))
        held, i = max(held, len(stream.held)), i + n
    assert Counted.read == len(stop) * len(reply)
    assert held < max(map(len, stop)) and sent >= len(reply) - held
    assert sent + len(text(stream.finish(reply))) == len(reply)


def test_stop_sequences_split_across_deltas() -> None:
    stop = ["</answer>", "STOP"]
    text_before = "The answer is 42"
    deltas = [text_before, "</", "ans", "w", "er>", " and more"]
    during, total = run(deltas, stop, False, text_before)
    assert text(during) == text(total) == text_before
    one_char = [*("x" * 10), *"</answer>", *"tail"]  # one character a delta
    during, total = run(one_char, stop, False, "x" * 10)
    assert text(during) == text(total) == "x" * 10
    # the earliest stop wins, even when a later-starting one completes first
    during, total = run(["abc", "STO", "P </answer>"], stop, False, "abc")
    assert text(total) == "abc"
    # a tail that never becomes a stop is sent once the next delta rules it out
    during, _ = run(["see </ans", "wers"], stop, False, "see </answers")
    assert text(during) == "see </answers"
