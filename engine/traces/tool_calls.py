"""Tool calls a request leaves unanswered: an assistant message's tool calls need their results (tool
messages naming the call's id) before the conversation goes on, or the provider refuses the request (the
Anthropic API answers 400 for a `tool_use` without its `tool_result` in the next user turn). A reader that rebuilt a request
with one missing dropped part of what the agent sent; the calls of the last message are still open."""

from __future__ import annotations

from collections.abc import Sequence

from engine.prompts.messages import Message
from engine.traces.request import TraceRequest

SHOWN = 10  # requests listed by name in the notes; the rest counted


def unanswered_calls(messages: Sequence[Message]) -> tuple[str, ...]:
    """The ids of the tool calls the tool messages right after their assistant message do not answer (the
    calls of a request's last message are open, not unanswered)."""
    out: list[str] = []
    open_calls: list[str] = []
    for k, m in enumerate(messages):
        if m["role"] == "tool":
            open_calls = [c for c in open_calls if c != m.get("tool_call_id")]
            continue
        out += open_calls
        open_calls = (
            [str(c.get("id", "")) for c in m.get("tool_calls") or []] if k < len(messages) - 1 else []
        )
    return tuple(out + open_calls)


def unanswered_notes(requests: Sequence[TraceRequest]) -> list[str]:
    """One line per request (the first `SHOWN`) whose history holds tool calls without their results."""
    found = [(i, r, r.unanswered) for i, r in enumerate(requests) if r.unanswered]
    lines = [
        f"request {i + 1} ({r.session}) sends tool calls without their results: {', '.join(ids)}"
        for i, r, ids in found[:SHOWN]
    ]
    if len(found) > SHOWN:
        lines.append(f"and {len(found) - SHOWN} more requests with tool calls without their results")
    return lines
