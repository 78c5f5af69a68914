"""Streaming: server-sent events, the keep-alive a stream sends while nothing else is ready, and
`AnswerStream`, which decides what of the generated text a stream may send yet, as `Piece`s: text, a tool
call's name as soon as it is read, then its argument fragments (engine/serve/tool_calls.py reads them).

The engine streams raw text; a client must never see text that the final answer does not contain. So a
stream holds back any tail that could still become a stop sequence (the final text is cut before it) and,
when tool calls are parsed, whatever may still become a call; a call is sent as a call as it forms, never as
text. Invariant: the pieces sent during the stream and at its end are exactly the final content and calls
(the parser reads the same text, in pieces, that `outcome_of` reads whole).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from engine.serve.tool_calls import Piece, Text, ToolCallParser

KEEP_ALIVE_COMMENT = ": keep-alive\n\n"  # an SSE comment: every client's event parser skips it


@dataclass(frozen=True)
class KeepAlive:
    """Nothing was sent for the keep-alive interval (queued, or prefilling): a stream sends its keep-alive
    (Anthropic's `ping` event once the message has started, an SSE comment otherwise)."""


def sse(data: dict[str, Any] | str, event: str | None = None) -> str:
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return (f"event: {event}\n" if event else "") + f"data: {payload}\n\n"


def _held_tail(text: str, markers: list[str]) -> int:
    """Length of the longest tail of `text` that is a proper prefix of one of `markers`."""
    best = 0
    for m in markers:
        for n in range(min(len(m) - 1, len(text)), best, -1):
            if text.endswith(m[:n]):
                best = n
                break
    return best


class AnswerStream:
    """`tool_format`: the format tool calls are parsed in (None: no tools are parsed)."""

    def __init__(self, stop: list[str], tool_format: str | None) -> None:
        self.stop = stop
        self.tools = ToolCallParser.for_format(tool_format) if tool_format else None
        self.text = ""  # everything generated so far
        self.safe = 0  # characters of it past which no stop sequence can start, all given to the parser

    def _safe(self) -> int:
        """How much of `self.text` is known to come before any stop sequence."""
        cut = min((self.text.index(s) for s in self.stop if s in self.text), default=None)
        if cut is not None:
            return max(cut, self.safe)
        return max(len(self.text) - _held_tail(self.text, self.stop), self.safe)

    def feed(self, delta: str) -> list[Piece]:
        """New text from the engine -> the pieces to send now (none when all of it is held back)."""
        self.text += delta
        safe = self._safe()
        new, self.safe = self.text[self.safe : safe], safe
        return self._pieces(new)

    def finish(self, final_text: str) -> list[Piece]:
        """The engine's final text (stop sequences cut; what was fed is a prefix of it) -> the pieces still
        to send."""
        rest = final_text[self.safe :] if final_text.startswith(self.text[: self.safe]) else ""
        self.safe = len(final_text)
        return self._pieces(rest) + (self.tools.finish()[0] if self.tools is not None else [])

    def _pieces(self, text: str) -> list[Piece]:
        if self.tools is not None:
            return self.tools.feed(text)
        return [Text(text)] if text else []
