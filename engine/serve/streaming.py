"""Streaming: server-sent events, and `TextStream`, which decides how much of the generated text a stream
may show yet.

The engine streams raw text; a client must never see text that the final answer does not contain. So a
stream holds back any tail that could still become a stop sequence (the final text is cut before it) and,
when tool calls are parsed, everything from `<tool_call>` on plus trailing whitespace (a parsed call is sent
as a call, not as text). Invariant: what was shown is a prefix of the final content, so `finish` only ever
appends.
"""

from __future__ import annotations

import json
from typing import Any

from engine.serve.tool_calls import OPEN, Parsed, content_before_calls


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
    def __init__(self, stop: list[str], parse_tools: bool) -> None:
        self.stop, self.parse_tools = stop, parse_tools
        self.markers = [*stop, OPEN] if parse_tools else list(stop)
        self.text = ""  # everything generated so far
        self.shown = 0  # characters of it already sent

    def _safe(self) -> int:
        """How much of `self.text` can be shown now."""
        cut = min((self.text.index(s) for s in self.stop if s in self.text), default=len(self.text))
        visible = self.text[:cut]
        if self.parse_tools and OPEN in visible:
            return len(content_before_calls(visible))
        end = len(visible) - _held_tail(visible, self.markers)
        if self.parse_tools:
            end = len(visible[:end].rstrip())
        return max(end, self.shown)

    def feed(self, delta: str) -> str:
        """New text from the engine -> the text to send now ("" when all of it is held back)."""
        self.text += delta
        safe = self._safe()
        out, self.shown = self.text[self.shown : safe], safe
        return out

    def finish(self, parsed: Parsed) -> str:
        """The final content (stop sequences cut, calls taken out) -> the text still to send."""
        content = parsed.content or ""
        rest = content[self.shown :] if content.startswith(self.text[: self.shown]) else ""
        self.shown = len(content)
        return rest
