"""Streaming: server-sent events, the keep-alive a stream sends while nothing else is ready, and
`TextStream`, which decides how much of the generated text a stream may show yet.

The engine streams raw text; a client must never see text that the final answer does not contain. So a
stream holds back any tail that could still become a stop sequence (the final text is cut before it) and,
when tool calls are parsed, shows only the text outside them (engine/serve/tool_calls.py: what may yet
become a call is held back; a parsed call is sent as a call, not as text). Invariant: what was shown is a
prefix of the final content, so `finish` only ever appends.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from engine.serve.tool_calls import Parsed, Text, ToolCallParser

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


class TextStream:
    """`tool_format`: the format tool calls are parsed in (None: no tools are parsed)."""

    def __init__(self, stop: list[str], tool_format: str | None) -> None:
        self.stop = stop
        self.tools = ToolCallParser.for_format(tool_format) if tool_format else None
        self.text = ""  # everything generated so far
        self.safe = 0  # characters of it past which no stop sequence can start
        self.shown = 0  # characters of content already sent

    def _safe(self) -> int:
        """How much of `self.text` is known to come before any stop sequence."""
        cut = min((self.text.index(s) for s in self.stop if s in self.text), default=None)
        if cut is not None:
            return max(cut, self.safe)
        return max(len(self.text) - _held_tail(self.text, self.stop), self.safe)

    def feed(self, delta: str) -> str:
        """New text from the engine -> the text to send now ("" when all of it is held back)."""
        self.text += delta
        safe = self._safe()
        new, self.safe = self.text[self.safe : safe], safe
        if self.tools is not None:
            new = "".join(p.text for p in self.tools.feed(new) if isinstance(p, Text))
        self.shown += len(new)
        return new

    def finish(self, parsed: Parsed) -> str:
        """The final content (stop sequences cut, calls taken out) -> the text still to send."""
        content = parsed.content or ""
        rest = content[self.shown :]
        self.shown = len(content)
        return rest
