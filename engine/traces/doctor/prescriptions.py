"""One rewrite per cause, in the trace's own terms (its requests), each checked to keep every line the
requests carried (`engine.traces.doctor.information`), and saying what it cannot keep.

| cause | rewrite |
|---|---|
| clock, path, id / nonce, counter, unknown (in the system prompt) | `move_volatile`: the line after everything stable, in the first message the request adds |
| reordered list | `pin_order`: the order the trace first used |
| re-rendered history, truncated / compacted history, a history edit | `append_only`: the earlier rendering kept, what the request adds appended |
| tools after the break | `tools_first`: the system text after the tools |
| changed tool definition, model or system swap, TTL / eviction | none: the request asks for something else, or nothing in it changed |
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engine.traces.analysis import replies
from engine.traces.doctor.causes import RERENDERED, SWAP, TOOL_CHANGED, TOOLS_AFTER, TRUNCATED, TTL, Span
from engine.traces.doctor.diagnosis import region_kind, request_spans
from engine.traces.doctor.history import append_only
from engine.traces.doctor.information import Kept, kept
from engine.traces.doctor.moves import move_volatile, pin_order, tools_first
from engine.traces.doctor.volatile import REORDERED, TEXT_KINDS
from engine.traces.request import TraceRequest

Rewriter = Callable[[Sequence[TraceRequest], Sequence[Span]], list[TraceRequest]]

WHAT = {
    "move_volatile": "move the changing line after everything stable (into the newest turn)",
    "pin_order": "pin the order the trace first used",
    "append_only": "render the history append-only (the earlier rendering kept)",
    "tools_first": "render the tools before the system text",
}
CANNOT = {
    "move_volatile": "the value's place: the model reads it in the newest turn, not the system prompt",
    "pin_order": "",
    "append_only": "",
    "tools_first": "the template's own order (a serving-side change: the trace is rewritten to render it)",
}
NONE = {
    TOOL_CHANGED: "a changed tool definition offers the model other tools: not rewritten",
    SWAP: "another model or system prompt is another cache: not rewritten",
    TTL: "nothing changed: send within the cache's retention (or a longer TTL); not rewritten",
}
TRUNCATION_NOTE = "the window's or compaction's bound: the whole history is kept, so prompts grow"


@dataclass(frozen=True)
class Prescription:
    cause: str
    region: str
    rewrite: str  # a key of WHAT; "" when the cause has none
    cannot_keep: str


def prescription(cause: str, region: str) -> Prescription:
    if cause in NONE:
        return Prescription(cause, region, "", NONE[cause])
    if cause == REORDERED:
        name = "pin_order"
    elif cause == TOOLS_AFTER:
        name = "tools_first"
    elif cause in (RERENDERED, TRUNCATED) or region == "history":
        name = "append_only"
    elif cause in TEXT_KINDS and region == "system":
        name = "move_volatile"
    else:
        return Prescription(cause, region, "", f"a {cause} span in the {region}: no rewrite known")
    note = TRUNCATION_NOTE if cause == TRUNCATED else CANNOT[name]
    return Prescription(cause, region, name, note)


REWRITERS: dict[str, Rewriter] = {
    "move_volatile": move_volatile,
    "pin_order": pin_order,
    "append_only": append_only,
    "tools_first": tools_first,
}


@dataclass(frozen=True)
class Rewritten:
    requests: list[TraceRequest]
    kept: Kept


def rewrite(
    requests: Sequence[TraceRequest], cause: str, region: str, extra: Sequence[Span] = ()
) -> Rewritten | None:
    """The trace with `cause` (in `region`) rewritten away, the spans found again on `requests` (plus
    `extra`, those the rendering adds: tools after the break); None where the cause has no rewrite."""
    p = prescription(cause, region)
    if not p.rewrite:
        return None
    spans = [
        s
        for s in [*request_spans(requests, replies(requests)), *extra]
        if s.cause == cause and region_kind(s.region) == region
    ]
    out = REWRITERS[p.rewrite](requests, spans)
    return Rewritten(out, kept(list(requests), out))
