"""The doctor's spans placed in the rendered prompt: each span's first token (where its text is found in
the prompt the model's template renders), and the `tools_after_break` spans: tool definitions, unchanged
from the compared request, that the template renders after a break in the system text (Qwen's templates
write the tools after the system prompt, so a volatile system line costs every tool token after it)."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, replace

from engine.traces.doctor.causes import TOOLS_AFTER, Span
from engine.traces.rendering import TraceRenderer
from engine.traces.request import TraceRequest


@dataclass(frozen=True)
class PlacedSpan:
    span: Span
    token: int | None  # first token of the span in the request's rendered prompt (None: not found)


def _token_at(offsets: Sequence[tuple[int, int]], char: int) -> int:
    starts = [a for a, _ in offsets]
    return max(bisect.bisect_right(starts, char) - 1, 0)


def place(
    spans: Sequence[Span], requests: Sequence[TraceRequest], renderer: TraceRenderer
) -> list[PlacedSpan]:
    """Every span with its token, plus a `tools_after_break` span after each request's first system break
    that precedes unchanged tools."""
    out: list[PlacedSpan] = []
    done: set[int] = set()
    for s in spans:
        req = requests[s.request]
        prompt = renderer.prompt(req)
        token = None
        if s.char >= 0:
            at = prompt.text.find(s.lead + s.after)
            token = _token_at(prompt.offsets, at + len(s.lead)) if at >= 0 else None
        out.append(PlacedSpan(s, token))
        same_tools = (requests[s.compared].tools or []) == (req.tools or [])
        if s.region != "system" or token is None or s.request in done or not req.tools or not same_tools:
            continue
        done.add(s.request)
        regions = renderer.regions(req, prompt, renderer.message_ends(req, prompt))
        tools = next((r for r in regions if r.kind == "tools"), None)
        if tools is not None and tools.start > token:
            n = tools.end - tools.start
            after = f"{n} tool-definition tokens (tokens {tools.start}-{tools.end}) rendered after the break"
            out.append(
                PlacedSpan(
                    replace(s, region="tools", cause=TOOLS_AFTER, char=-1, before="", after=after),
                    tools.start,
                )
            )
    return out
