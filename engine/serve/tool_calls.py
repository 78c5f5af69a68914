"""Tool calls in a model's output, read incrementally, in the format its chat template teaches
(engine/prompts/chat.py `tool_format`):

- `hermes` (Qwen2 / Qwen2.5 / Qwen3, and `generic`, the format engine/prompts/chat.py teaches templates
  without a tool section): `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks, anywhere in
  the output, with text around them;
- `llama3_json` (Llama 3.1 / 3.2 / 3.3): an output that starts with `{"name": ..., "parameters": {...}}`
  (several calls separated by `;`); an output that starts otherwise is text.

A parser is fed the text as it is generated (`feed`) and returns `Piece`s: `Text` outside calls,
`CallStart` as soon as a call's name is read, then `CallArguments` fragments as its arguments object forms
(the fragments of a call join to its `arguments`, the JSON text as the model wrote it), so a stream can send
calls as they form. `finish` returns the last pieces and the `Parsed` output. Invariants: the pieces are
all the answer has (a stream that sends them shows exactly the final content and calls); whitespace right
before a call, and at the end of an output with calls, is not content.

A call is a call once its name is read. What went wrong is kept in `Parsed.problems` (the `kvtestbed`
object reports it): a call whose closing tag never came (`unclosed`: the output ended inside it), arguments
that are not a complete JSON object; a block that holds no call (not JSON, no name) stays text, and is
reported too. Nothing is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.prompts.chat import HERMES, LLAMA3_JSON
from engine.serve.call_reader import CallArguments, CallReader, CallStart, Piece, Text, ToolCall

__all__ = [
    "CallArguments",
    "CallStart",
    "Parsed",
    "Piece",
    "Text",
    "ToolCall",
    "ToolCallParser",
    "parse_tool_calls",
]

OPEN, CLOSE = "<tool_call>", "</tool_call>"


@dataclass(frozen=True)
class Parsed:
    content: str | None  # with calls: the text outside them (None: none); without: the whole output
    calls: list[ToolCall]
    problems: list[dict[str, Any]] = field(default_factory=list)  # {"call", "problem", "text"}
    raw: list[str] = field(default_factory=list)  # each call's text as written (whitespace before it too)

    def report(self, fmt: str) -> dict[str, Any]:
        """The `tool_calls` entry of the `kvtestbed` object."""
        return {"format": fmt, "calls": len(self.calls), "problems": self.problems}


def _held_tail(text: str, marker: str) -> int:
    """Length of the longest tail of `text` that is a proper prefix of `marker`."""
    for n in range(min(len(marker) - 1, len(text)), 0, -1):
        if text.endswith(marker[:n]):
            return n
    return 0


class ToolCallParser:
    """The parser of one output; `for_format` picks the family's."""

    def __init__(self) -> None:
        self.pending = ""  # text received and not yet sent (a possible start of a call, whitespace)
        self.reader: CallReader | None = None
        self.calls: list[ToolCall] = []
        self.problems: list[dict[str, Any]] = []
        self.content: list[str] = []
        self.raw: list[str] = []

    @staticmethod
    def for_format(fmt: str) -> ToolCallParser:
        return LlamaJsonParser() if fmt == LLAMA3_JSON else HermesParser()

    def feed(self, delta: str) -> list[Piece]:
        raise NotImplementedError

    def finish(self) -> tuple[list[Piece], Parsed]:
        raise NotImplementedError

    def _text(self, text: str) -> list[Piece]:
        if not text:
            return []
        self.content.append(text)
        return [Text(text)]

    def _end_call(self, closed: bool, raw: str) -> list[Piece]:
        """Close the open call; `raw` is its whole text: the call's as written, or text when it holds none."""
        assert self.reader is not None
        pieces, call, problem = self.reader.close(closed)
        self.reader = None
        if problem is not None:
            self.problems.append(problem)
        if call is None:
            return self._text(raw)
        self.calls.append(call)
        self.raw.append(raw)
        return pieces

    def _parsed(self) -> Parsed:
        content = "".join(self.content)
        if self.calls:
            return Parsed(content if content.strip() else None, self.calls, self.problems, self.raw)
        return Parsed(content, [], self.problems)


class HermesParser(ToolCallParser):
    """`pending` holds at most a possible start of a tag; whitespace after the text shown is held in `held`
    (as it came: never copied while it grows), sent before the next text or dropped before a call."""

    def __init__(self) -> None:
        super().__init__()
        self.held: list[str] = []  # whitespace after the text shown: content, unless a call follows
        self.space = ""  # whitespace held before the open call's block: dropped if the block is a call

    def feed(self, delta: str) -> list[Piece]:
        text, self.pending = self.pending + delta, ""
        out: list[Piece] = []
        at = 0
        while True:
            if self.reader is None:
                found = text.find(OPEN, at)
                if found < 0:
                    keep = len(text) - _held_tail(text, OPEN)
                    self.pending = text[max(keep, at) :]
                    return out + self._hold(text[at:keep])
                out += self._hold(text[at:found])
                self.space, self.held = "".join(self.held), []
                at = found + len(OPEN)
                self.reader = CallReader(len(self.calls))
            else:
                found = text.find(CLOSE, at)
                if found < 0:
                    keep = len(text) - _held_tail(text, CLOSE)
                    self.pending = text[max(keep, at) :]
                    return out + self.reader.feed(text[at:keep])
                out += self.reader.feed(text[at:found])
                at = found + len(CLOSE)
                out += self._end_call(True, self.space + OPEN + self.reader.text + CLOSE)
                self.space = ""

    def _hold(self, text: str) -> list[Piece]:
        """Text outside calls: shown up to its trailing whitespace, which is held."""
        shown = text.rstrip()
        if not shown:
            self.held += [text] if text else []
            return []
        out = self._text("".join(self.held) + shown)
        self.held = [text[len(shown) :]]
        return out

    def finish(self) -> tuple[list[Piece], Parsed]:
        out: list[Piece] = []
        if self.reader is not None:
            out += self.reader.feed(self.pending)
            out += self._end_call(False, self.space + OPEN + self.reader.text)
        else:
            rest = "".join(self.held) + self.pending
            out += self._text(rest.rstrip() if self.calls else rest)
        self.pending, self.held = "", []
        return out, self._parsed()


class LlamaJsonParser(ToolCallParser):
    """Calls only at the start of the output (after whitespace), as vLLM's `llama3_json` parser reads
    them; `<|python_tag|>` is a special token, not in the decoded text. While undecided at a place where
    whitespace may follow (before the output's first character, after `{` or a call's `;`), whitespace is
    kept aside as it came and read only with the next other character."""

    def __init__(self) -> None:
        super().__init__()
        self.state = "start"  # start (undecided) | calls | text
        self.spaces: list[str] = []  # whitespace received while `quiet`
        self.quiet = True  # undecided, and whitespace next changes nothing

    def feed(self, delta: str) -> list[Piece]:
        if self.reader is None and self.state == "start" and self.quiet and (not delta or delta.isspace()):
            self.spaces.append(delta)
            return []
        self.pending += "".join(self.spaces) + delta
        self.spaces = []
        out: list[Piece] = []
        while True:
            if self.state == "text":
                out += self._text(self.pending)
                self.pending = ""
                return out
            if self.reader is None:
                rest = self.pending.lstrip()
                if self.calls:
                    rest = rest.removeprefix(";").lstrip()
                if not rest:
                    self.quiet = True
                    return out  # only whitespace (or a separator) so far
                after = rest[1:].lstrip()
                if rest[0] != "{" or not ('"name"'.startswith(after) or after.startswith('"name"')):
                    self.state = "text"
                    self.pending = self.pending if not self.calls else self.pending.lstrip()
                    continue
                if not after.startswith('"name"'):
                    self.quiet = not after
                    return out  # `{` so far, or `{"na`: undecided
                self.pending = rest
                self.reader = CallReader(len(self.calls))
            out += self.reader.feed(self.pending)
            self.pending = ""
            end = self.reader.object_end
            if end is None:
                return out
            tail = self.reader.cut(end)
            out += self._end_call(True, self.reader.text)
            self.pending = tail

    def finish(self) -> tuple[list[Piece], Parsed]:
        out: list[Piece] = []
        self.pending += "".join(self.spaces)
        if self.reader is not None:
            out += self._end_call(False, self.reader.text)
        elif self.state == "text" or not self.calls:
            out += self._text(self.pending)
        self.pending, self.spaces = "", []
        return out, self._parsed()


def parse_tool_calls(text: str, fmt: str = HERMES) -> Parsed:
    """The calls in a whole output and the text around them (what a stream of it sends, at once)."""
    parser = ToolCallParser.for_format(fmt)
    parser.feed(text)
    return parser.finish()[1]
