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

from engine.runtime.stop_strings import StopMatcher
from engine.serve.tool_calls import Piece, Text, ToolCallParser

KEEP_ALIVE_COMMENT = ": keep-alive\n\n"  # an SSE comment: every client's event parser skips it


@dataclass(frozen=True)
class KeepAlive:
    """Nothing was sent for the keep-alive interval (queued, or prefilling): a stream sends its keep-alive
    (Anthropic's `ping` event once the message has started, an SSE comment otherwise)."""


def sse(data: dict[str, Any] | str, event: str | None = None) -> str:
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return (f"event: {event}\n" if event else "") + f"data: {payload}\n\n"


class AnswerStream:
    """`tool_format`: the format tool calls are parsed in (None: no tools are parsed). The stop sequences are
    found as the text comes (engine/runtime/stop_strings.py: each character looked at once, a sequence
    split across deltas found too); only the tail that may still become one is kept, so a delta costs its
    own length, not the reply's."""

    def __init__(self, stop: list[str], tool_format: str | None) -> None:
        self.stops = StopMatcher(tuple(stop))
        self.tools = ToolCallParser.for_format(tool_format) if tool_format else None
        self.cut: int | None = None  # where the first stop sequence starts, once one is found
        self.sent: list[str] = []  # the text given to the parser, in its pieces
        self.held = ""  # the text after it: what may still become a stop sequence
        self.safe = 0  # characters past which no stop sequence can start, all given to the parser

    def feed(self, delta: str) -> list[Piece]:
        """New text from the engine -> the pieces to send now (none when all of it is held back)."""
        if self.cut is None:
            hit = self.stops.feed(delta)
            self.cut = hit[0] if hit is not None else None
            self.held += delta
        safe = max(self.cut if self.cut is not None else self.stops.length - self.stops.partial, self.safe)
        new, self.held = self.held[: safe - self.safe], self.held[safe - self.safe :]
        self.safe = safe
        self.sent.append(new)
        return self._pieces(new)

    def finish(self, final_text: str) -> list[Piece]:
        """The engine's final text (stop sequences cut; what was fed is a prefix of it) -> the pieces still
        to send."""
        rest = final_text[self.safe :] if final_text.startswith("".join(self.sent)) else ""
        self.safe = len(final_text)
        return self._pieces(rest) + (self.tools.finish()[0] if self.tools is not None else [])

    def _pieces(self, text: str) -> list[Piece]:
        if self.tools is not None:
            return self.tools.feed(text)
        return [Text(text)] if text else []
