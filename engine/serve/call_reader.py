"""One tool call object in a model's output, read as it is generated: the pieces a stream sends (`CallStart`
once the name's string is complete, then `CallArguments` fragments as the arguments object forms) and the
`ToolCall` it holds once it ends (engine/serve/tool_calls.py finds where calls start and end).

Every character is looked at a bounded number of times however the text arrives (one character at a time,
a 200,000-character name that never closes, a flood of whitespace): the text is kept as the fragments it
came in, and the call's head (`{"name": "..."`, then `, "arguments": `) is matched character by
character, never re-read. The JSON a model writes is read within what a request body may hold
(engine/traces/fields.py: 256 levels, 4,300-digit integers, Unicode strings); beyond, it is no JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from engine.traces import fields

SNIPPET = 80  # characters of a problem's text kept in its report
SPACE = ""  # a step of a head: any run of whitespace
NAME_HEAD = (SPACE, ("{",), SPACE, ('"name"',), SPACE, (":",), SPACE, ('"',))
ARGUMENTS_HEAD = (SPACE, (",",), SPACE, ('"arguments"', '"parameters"'), SPACE, (":",), SPACE)


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
        value = loads(self.arguments)
        return value if isinstance(value, dict) else {}


def loads(text: str) -> Any:
    """The JSON value the model wrote, within what a request body may hold; None when it is not JSON or
    goes beyond that (a `\\ud800` escape is no Unicode text)."""
    try:
        return fields.loads(text)
    except (ValueError, fields.FieldError):  # JSONDecodeError and JSONLimitError are ValueErrors
        return None


def problem(call: int | None, what: str, text: str) -> dict[str, Any]:
    return {"call": call, "problem": what, "text": text[:SNIPPET]}


def object_call(text: str) -> tuple[str, str] | None:
    """(name, arguments JSON) of a whole call object's text, or None when it holds no call."""
    data = loads(text)
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        return None
    arguments = data.get("arguments", data.get("parameters", {}))
    if isinstance(arguments, str):  # some models write the arguments as a JSON string
        return data["name"], arguments
    return data["name"], json.dumps(arguments, ensure_ascii=False)


class _Head:
    """Matches `steps` (whitespace runs, or one of some literals) against text fed in pieces, from the
    text's start: `end` is where the match ends once made (a whitespace step last: where the next
    non-whitespace character is), `failed` once it cannot be made."""

    def __init__(self, steps: tuple[Any, ...], at: int) -> None:
        self.steps, self.step, self.got = steps, 0, ""
        self.at = at  # position of the next character to look at
        self.end: int | None = None
        self.failed = False

    def feed(self, text: str, base: int) -> None:
        """`text` starts at position `base` of the whole; what lies before `self.at` was seen already."""
        for i in range(max(self.at - base, 0), len(text)):
            if self.end is not None or self.failed:
                return
            self._char(text[i], base + i)
        self.at = base + len(text)

    def _char(self, c: str, at: int) -> None:
        want = self.steps[self.step]
        if want == SPACE:
            if c.isspace():
                return
            self.step += 1
            if self.step == len(self.steps):
                self.end = at
                return
            want = self.steps[self.step]
        self.got += c
        if self.got in want:
            self.step, self.got = self.step + 1, ""
            if self.step == len(self.steps):
                self.end = at + 1
        elif not any(w.startswith(self.got) for w in want):
            self.failed = True


class CallReader:
    """One call object's text, read as it grows: the name once its string is complete, then the arguments
    object character by character (string-aware brace depth) up to its closing brace."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.parts: list[str] = []  # the text, as fed
        self.length = 0
        self.name: str | None = None
        self.head = _Head(NAME_HEAD, 0)
        self.name_end: int | None = None  # one past the name string's closing quote, once found
        self.keys: _Head | None = None  # the arguments key's head, from the name's end
        self.name_escaped = False
        self.start: int | None = None  # where the arguments value starts
        self.object_arguments = False  # that value is an object: streamed as it forms
        self.end: int | None = None  # one past the arguments object's closing brace
        self.object_end: int | None = None  # one past the whole call object's closing brace
        self.sent = 0  # end of the arguments text sent so far
        self.depth, self.in_string, self.escaped = 0, False, False

    @property
    def text(self) -> str:
        if len(self.parts) > 1:
            self.parts = ["".join(self.parts)]
        return self.parts[0] if self.parts else ""

    def cut(self, end: int) -> str:
        """Keep the text up to `end`; returns what came after."""
        text = self.text
        self.parts, self.length = [text[:end]], end
        return text[end:]

    def _slice(self, start: int, end: int) -> str:
        last = self.length - len(self.parts[-1])
        if start >= last:
            return self.parts[-1][start - last : end - last]
        return self.text[start:end]

    def feed(self, text: str) -> list[Piece]:
        base = self.length
        self.parts.append(text)
        self.length += len(text)
        out: list[Piece] = []
        if self.name is None and not self.head.failed:
            out += self._name(text, base)
        if self.keys is not None and self.start is None and not self.keys.failed:
            self.keys.feed(text, base)
            if self.keys.end is not None and self.keys.end < self.length:
                self.start = self.sent = self.keys.end
                self.object_arguments = self._slice(self.start, self.start + 1) == "{"
        self._scan(text, base)
        if self.object_arguments:  # streamed as it forms (anything else is sent when it ends)
            upto = self.end if self.end is not None else self.length
            if upto > self.sent:
                out.append(CallArguments(self.index, self._slice(self.sent, upto)))
                self.sent = upto
        return out

    def _name(self, text: str, base: int) -> list[Piece]:
        """The head up to the name's opening quote, then the name's string to its closing quote."""
        if self.head.end is None:
            self.head.feed(text, base)
            if self.head.end is None:
                return []
        for i in range(max(self.head.end, base) - base, len(text)):
            c = text[i]
            if self.name_escaped:
                self.name_escaped = False
            elif c == "\\":
                self.name_escaped = True
            elif c == '"':
                self.name_end = base + i + 1
                break
        if self.name_end is None:
            return []
        name = loads(self.text[self.head.end - 1 : self.name_end])
        if not isinstance(name, str):
            self.head.failed = True  # an escape that is no JSON: never a name
            return []
        self.name, self.keys = name, _Head(ARGUMENTS_HEAD, self.name_end)
        return [CallStart(self.index, name)]

    def _scan(self, text: str, base: int) -> None:
        """Brace depth over the new text: the arguments object's end (back at depth 1) and the call's."""
        for i, c in enumerate(text):
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
                at = base + i
                if self.depth == 1 and self.start is not None and self.end is None and at >= self.start:
                    self.end = at + 1
                if self.depth == 0 and self.object_end is None:
                    self.object_end = at + 1

    def close(self, closed: bool) -> tuple[list[Piece], ToolCall | None, dict[str, Any] | None]:
        """The call has ended (`closed`: its closing tag or brace came; else the output ended inside it):
        the pieces still to send, the call (None: the text holds none) and what went wrong, if anything."""
        text = self.text
        body = text[: self.object_end] if self.object_end is not None else text
        whole = object_call(body.strip())
        if self.name is None:
            if whole is None:
                return [], None, problem(None, "not a tool call", text)
            name, arguments = whole
            pieces: list[Piece] = [CallStart(self.index, name), CallArguments(self.index, arguments)]
            return (
                pieces,
                ToolCall(name, arguments),
                None if closed else problem(self.index, "unclosed", text),
            )
        if self.object_arguments:
            arguments = text[self.start : self.end if self.end is not None else len(text)]
            pieces = []
        else:  # no arguments, or not an object: sent whole now
            arguments = whole[1] if whole is not None else "{}" if self.start is None else text[self.start :]
            pieces = [CallArguments(self.index, arguments)]
        found = None
        if not closed:
            found = problem(self.index, "unclosed", text)
        elif not isinstance(loads(arguments), dict):
            found = problem(self.index, "arguments are not a JSON object", arguments)
        return pieces, ToolCall(self.name, arguments), found
