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

import json
import re
from dataclasses import dataclass, field
from typing import Any

from engine.prompts.chat import HERMES, LLAMA3_JSON

OPEN, CLOSE = "<tool_call>", "</tool_call>"
NAME = re.compile(r'\s*\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"')
ARGUMENTS_KEY = re.compile(r'\s*,\s*"(?:arguments|parameters)"\s*:\s*(?=\S)')
SNIPPET = 80  # characters of a problem's text kept in its report


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class CallStart:
    index: int
    name: str


@dataclass(frozen=True)
class CallArguments:
    index: int
    fragment: str


Piece = Text | CallStart | CallArguments


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: str  # the arguments' JSON text as the model wrote it (what a stream sends, in fragments)

    @property
    def input(self) -> dict[str, Any]:
        """The arguments as an object (Anthropic's `input`); {} when they are not one (then reported)."""
        try:
            value = json.loads(self.arguments)
        except json.JSONDecodeError:
            return {}
        return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class Parsed:
    content: str | None  # with calls: the text outside them (None: none); without: the whole output
    calls: list[ToolCall]
    problems: list[dict[str, Any]] = field(default_factory=list)  # {"call", "problem", "text"}

    def report(self, fmt: str) -> dict[str, Any]:
        """The `tool_calls` entry of the `kvtestbed` object."""
        return {"format": fmt, "calls": len(self.calls), "problems": self.problems}


def _problem(call: int | None, problem: str, text: str) -> dict[str, Any]:
    return {"call": call, "problem": problem, "text": text[:SNIPPET]}


def _object_call(text: str) -> tuple[str, str] | None:
    """(name, arguments JSON) of a whole call object's text, or None when it holds no call."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        return None
    arguments = data.get("arguments", data.get("parameters", {}))
    if isinstance(arguments, str):  # some models write the arguments as a JSON string
        return data["name"], arguments
    return data["name"], json.dumps(arguments, ensure_ascii=False)


class _CallReader:
    """One call object's text, read as it grows: the name once its string is complete, then the arguments
    object character by character (string-aware brace depth) up to its closing brace."""

    def __init__(self, index: int) -> None:
        self.index, self.text = index, ""
        self.name: str | None = None
        self.after_name = 0  # where the text after the name's string starts
        self.start: int | None = None  # where the arguments value starts
        self.end: int | None = None  # one past the arguments object's closing brace
        self.object_end: int | None = None  # one past the whole call object's closing brace
        self.sent = 0  # end of the arguments text sent so far
        self.scanned, self.depth, self.in_string, self.escaped = 0, 0, False, False

    def feed(self, text: str) -> list[Piece]:
        self.text += text
        out: list[Piece] = []
        if self.name is None:
            m = NAME.match(self.text)
            if m is None:
                return out
            try:
                self.name = json.loads(f'"{m.group(1)}"')
            except json.JSONDecodeError:
                return out
            self.after_name = m.end()
            out.append(CallStart(self.index, self.name))
        if self.start is None and (m := ARGUMENTS_KEY.match(self.text, self.after_name)) is not None:
            self.start = self.sent = m.end()
        self._scan()
        if (
            self.start is not None and self.text[self.start] == "{"
        ):  # an object: streamed as it forms (anything else when it ends)
            upto = self.end if self.end is not None else len(self.text)
            if upto > self.sent:
                out.append(CallArguments(self.index, self.text[self.sent : upto]))
                self.sent = upto
        return out

    def _scan(self) -> None:
        """Brace depth over the new text: the arguments object's end (back at depth 1) and the call's."""
        for i in range(self.scanned, len(self.text)):
            c = self.text[i]
            if self.in_string:
                if self.escaped:
                    self.escaped = False
                elif c == "\\":
                    self.escaped = True
                elif c == '"':
                    self.in_string = False
            elif c == '"':
                self.in_string = True
            elif c in "{[":
                self.depth += 1
            elif c in "}]":
                self.depth -= 1
                if self.depth == 1 and self.start is not None and self.end is None and i >= self.start:
                    self.end = i + 1
                if self.depth == 0 and self.object_end is None:
                    self.object_end = i + 1
        self.scanned = len(self.text)

    def close(self, closed: bool) -> tuple[list[Piece], ToolCall | None, dict[str, Any] | None]:
        """The call has ended (`closed`: its closing tag or brace came; else the output ended inside it):
        the pieces still to send, the call (None: the text holds none) and what went wrong, if anything."""
        body = self.text[: self.object_end] if self.object_end is not None else self.text
        whole = _object_call(body.strip())
        if self.name is None:
            if whole is None:
                return [], None, _problem(None, "not a tool call", self.text)
            name, arguments = whole
            pieces: list[Piece] = [CallStart(self.index, name), CallArguments(self.index, arguments)]
            problem = None if closed else _problem(self.index, "unclosed", self.text)
            return pieces, ToolCall(name, arguments), problem
        if self.start is not None and self.text[self.start] == "{":
            arguments = self.text[self.start : self.end if self.end is not None else len(self.text)]
            pieces = []
        else:  # no arguments, or not an object: sent whole now
            arguments = (
                whole[1] if whole is not None else "{}" if self.start is None else self.text[self.start :]
            )
            pieces = [CallArguments(self.index, arguments)]
        call = ToolCall(self.name, arguments)
        problem = None
        if not closed:
            problem = _problem(self.index, "unclosed", self.text)
        elif not isinstance(_loads(arguments), dict):
            problem = _problem(self.index, "arguments are not a JSON object", arguments)
        return pieces, call, problem


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None


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
        self.reader: _CallReader | None = None
        self.calls: list[ToolCall] = []
        self.problems: list[dict[str, Any]] = []
        self.content: list[str] = []

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
        """Close the open call; `raw` is its whole text, kept as text when it holds no call."""
        assert self.reader is not None
        pieces, call, problem = self.reader.close(closed)
        self.reader = None
        if problem is not None:
            self.problems.append(problem)
        if call is None:
            return self._text(raw)
        self.calls.append(call)
        return pieces

    def _parsed(self) -> Parsed:
        content = "".join(self.content)
        if self.calls:
            return Parsed(content if content.strip() else None, self.calls, self.problems)
        return Parsed(content, [], self.problems)


class HermesParser(ToolCallParser):
    def __init__(self) -> None:
        super().__init__()
        self.space = ""  # whitespace held before a block: dropped if the block is a call

    def feed(self, delta: str) -> list[Piece]:
        self.pending += delta
        out: list[Piece] = []
        while True:
            if self.reader is None:
                at = self.pending.find(OPEN)
                if at < 0:
                    keep = len(self.pending) - _held_tail(self.pending, OPEN)
                    shown = self.pending[:keep].rstrip()
                    out += self._text(shown)
                    self.pending = self.pending[len(shown) :]
                    return out
                before = self.pending[:at]
                out += self._text(before.rstrip())
                self.space = before[len(before.rstrip()) :]
                self.pending = self.pending[at + len(OPEN) :]
                self.reader = _CallReader(len(self.calls))
            else:
                at = self.pending.find(CLOSE)
                if at < 0:
                    keep = len(self.pending) - _held_tail(self.pending, CLOSE)
                    out += self.reader.feed(self.pending[:keep])
                    self.pending = self.pending[keep:]
                    return out
                out += self.reader.feed(self.pending[:at])
                self.pending = self.pending[at + len(CLOSE) :]
                out += self._end_call(True, self.space + OPEN + self.reader.text + CLOSE)
                self.space = ""

    def finish(self) -> tuple[list[Piece], Parsed]:
        out: list[Piece] = []
        if self.reader is not None:
            out += self.reader.feed(self.pending)
            out += self._end_call(False, self.space + OPEN + self.reader.text)
        else:
            out += self._text(self.pending.rstrip() if self.calls else self.pending)
        self.pending = ""
        return out, self._parsed()


class LlamaJsonParser(ToolCallParser):
    """Calls only at the start of the output (after whitespace), as vLLM's `llama3_json` parser reads
    them; `<|python_tag|>` is a special token, not in the decoded text."""

    def __init__(self) -> None:
        super().__init__()
        self.state = "start"  # start (undecided) | calls | text

    def feed(self, delta: str) -> list[Piece]:
        self.pending += delta
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
                    return out  # only whitespace (or a separator) so far
                after = rest[1:].lstrip()
                if rest[0] != "{" or not ('"name"'.startswith(after) or after.startswith('"name"')):
                    self.state = "text"
                    self.pending = self.pending if not self.calls else self.pending.lstrip()
                    continue
                if not after.startswith('"name"'):
                    return out  # `{` so far, or `{"na`: undecided
                self.pending = rest
                self.reader = _CallReader(len(self.calls))
            out += self.reader.feed(self.pending)
            self.pending = ""
            end = self.reader.object_end
            if end is None:
                return out
            tail = self.reader.text[end:]
            self.reader.text = self.reader.text[:end]
            out += self._end_call(True, self.reader.text)
            self.pending = tail

    def finish(self) -> tuple[list[Piece], Parsed]:
        out: list[Piece] = []
        if self.reader is not None:
            out += self._end_call(False, self.reader.text)
        elif self.state == "text" or not self.calls:
            out += self._text(self.pending)
        self.pending = ""
        return out, self._parsed()


def parse_tool_calls(text: str, fmt: str = HERMES) -> Parsed:
    """The calls in a whole output and the text around them (what a stream of it sends, at once)."""
    parser = ToolCallParser.for_format(fmt)
    parser.feed(text)
    return parser.finish()[1]
