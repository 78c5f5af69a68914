"""Rewrites that keep a trace's messages where they are and move or order what is inside them.

- `move_volatile`: the system-prompt lines that hold a volatile span (a clock, a path, an id, a counter)
  leave the system prompt, which then stays the same from request to request, and join the first message
  the request adds to what it continues (the newest user turn, for an agent loop), where they stay as the
  conversation goes on: the history only grows, as `bench layout`'s stable-first layout keeps it;
- `pin_order`: reordered tools, or reordered runs of lines, in the order the trace first used;
- `tools_first`: the system text as a system message after an empty first one, so a template that writes
  the tools into its first system turn renders them ahead of the system text;
- `changed_tools_last`: the tools whose definition changes in the trace after those that never change, so
  the prefix through the stable ones is kept (the definitions themselves as each request sent them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from engine.prompts.messages import Message
from engine.traces.analysis import replies
from engine.traces.blocks import blocks_of, canonical, derived_blocks
from engine.traces.doctor.causes import Span, message_text, tool_name
from engine.traces.doctor.diagnosis import compared_requests
from engine.traces.request import Breakpoint, TraceRequest

MIN_ANCHOR = 3  # characters of stable text a volatile line is recognised by


def with_messages(req: TraceRequest, messages: list[Message], tools: list | None = None) -> TraceRequest:
    """`req` with new messages (and tools): its content blocks re-derived from them; Anthropic breakpoints,
    which indexed the old blocks, placed after the system prompt and on the last block, at the shortest of
    their TTLs (a prefix ending where the stable part ends, and the whole request)."""
    tools = req.tools if tools is None else tools
    new = replace(req, messages=messages, tools=tools, blocks=(), breakpoints=())
    if not req.breakpoints:
        return new
    ttl = min(b.ttl_s for b in req.breakpoints)
    stable = len(tools or []) + len(leading_system(messages)) - 1
    marks = sorted({i for i in (stable, len(derived_blocks(new)) - 1) if i >= 0})
    return replace(new, breakpoints=tuple(Breakpoint(i, ttl) for i in marks))


def _anchors(spans: Sequence[Span], requests: Sequence[TraceRequest]) -> set[tuple[str, str]]:
    """(line start, line end) around each system span: the stable text its line is recognised by."""
    out = set()
    for s in spans:
        text = "\n".join(message_text(m) for m in leading_system(requests[s.request].messages))
        start = text.rfind("\n", 0, s.char) + 1
        stop = text.find("\n", s.char + len(s.after))
        head, tail = text[start : s.char], text[s.char + len(s.after) : stop if stop >= 0 else len(text)]
        if len(head.strip()) + len(tail.strip()) >= MIN_ANCHOR:
            out.add((head, tail))
    return out


def leading_system(messages: Sequence[Message]) -> list[Message]:
    return list(messages[: next((i for i, m in enumerate(messages) if m["role"] != "system"), len(messages))])


def _volatile(line: str, anchors: set[tuple[str, str]]) -> bool:
    return any(line.startswith(h) and line.endswith(t) and len(line) >= len(h) + len(t) for h, t in anchors)


def move_volatile(requests: Sequence[TraceRequest], spans: Sequence[Span]) -> list[TraceRequest]:
    anchors = _anchors([s for s in spans if s.region == "system" and s.char >= 0], requests)
    if not anchors:
        return list(requests)
    compared, following = compared_requests(requests), replies(requests)
    notes: dict[tuple[str, int, str], str] = {}  # (session, index, message) -> the note it carries
    out = []
    for i, req in enumerate(requests):
        lead = len(leading_system(req.messages))
        moved: list[str] = []
        messages: list[Message] = []
        for m in req.messages[:lead]:
            keep = [x for x in str(m.get("content") or "").split("\n") if not _volatile(x, anchors)]
            moved += [x for x in str(m.get("content") or "").split("\n") if _volatile(x, anchors)]
            messages.append({**m, "content": "\n".join(keep)})
        p = compared[i]
        before = [*requests[p].messages, *([following[p]] if following[p] else [])] if p is not None else []
        first_new = next(
            (k for k in range(lead, len(req.messages)) if k >= len(before) or before[k] != req.messages[k]),
            len(req.messages),
        )
        for k, m in enumerate(req.messages[lead:], lead):
            key = (req.session, k, canonical(m))
            if k == first_new and moved and key not in notes:
                notes[key] = "\n".join(moved)
            note = notes.get(key)
            messages.append({**m, "content": f"{m.get('content') or ''}\n\n{note}"} if note else m)
        if moved and first_new == len(req.messages):  # nothing new to carry it: a trailing system note
            messages.append({"role": "system", "content": "\n".join(moved)})
        out.append(with_messages(req, messages))
    return out


def pin_order(requests: Sequence[TraceRequest], spans: Sequence[Span]) -> list[TraceRequest]:
    tool_rank: dict[str, int] = {}
    for req in requests:
        for tool in req.tools or []:
            tool_rank.setdefault(canonical(tool), len(tool_rank))
    line_rank: dict[str, int] = {}
    for s in spans:
        if s.region != "tools":
            for line in s.before.split("\n"):
                line_rank.setdefault(line, len(line_rank))
    out = []
    for req in requests:
        tools = sorted(req.tools, key=lambda t: tool_rank[canonical(t)]) if req.tools else req.tools
        messages = [_pinned(m, line_rank) for m in req.messages] if line_rank else req.messages
        out.append(with_messages(req, messages, tools))
    return out


def _pinned(m: Message, rank: dict[str, int]) -> Message:
    """A message whose runs of ranked lines are in rank order."""
    text = m.get("content")
    if not isinstance(text, str) or not text:
        return m
    lines, out, run = text.split("\n"), [], []
    for line in [*lines, None]:
        if line is not None and line in rank:
            run.append(line)
            continue
        out += sorted(run, key=rank.__getitem__)
        run = []
        if line is not None:
            out.append(line)
    return {**m, "content": "\n".join(out)}


def tools_first(requests: Sequence[TraceRequest], spans: Sequence[Span]) -> list[TraceRequest]:
    out = []
    for req in requests:
        if req.tools and req.messages and req.messages[0]["role"] == "system":
            # a rendering change: the content blocks providers hash (tools first already) stay as they were
            messages = [{"role": "system", "content": ""}, *req.messages]
            out.append(replace(req, messages=messages, blocks=blocks_of(req)))
        else:
            out.append(req)
    return out


def changed_tools_last(requests: Sequence[TraceRequest], spans: Sequence[Span]) -> list[TraceRequest]:
    """Every tool whose definition changes somewhere in the trace after those that never change."""
    changed = {s.region.removeprefix("tool ") for s in spans if s.region.startswith("tool ")}
    out = []
    for req in requests:
        tools = req.tools or []
        order = [t for t in tools if tool_name(t) not in changed] + [
            t for t in tools if tool_name(t) in changed
        ]
        out.append(with_messages(req, list(req.messages), order) if order != tools else req)
    return out
