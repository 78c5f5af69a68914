"""The rewrites per cause, in the trace's own terms (its requests), each checked to keep every line the
requests carried (`engine.traces.doctor.information`), and saying what it cannot keep.

| cause | rewrite |
|---|---|
| clock, path, counter, unknown (in the system prompt) | `move_volatile`: the line after everything stable, in the first message the request adds |
| id / nonce (in the system prompt) | `per_session_nonce`: each session's first value on all its requests (the originals named in the report) |
| reordered list | `pin_order`: the order the trace first used |
| re-rendered history, truncated / compacted history, a history edit | `append_only`: the earlier rendering kept, what the request adds appended |
| tools after the break | `tools_first`: the system text after the tools |
| changed tool definition | `changed_tools_last`: the changed tools after the stable ones |
| TTL / eviction | `longer_ttl` (1-hour / 24-hour retention), `keep_alive` (a copy every 4.5 min within a gap): what providers allow, each measured |
| model or system swap | none (it changes what the request asks): `without_swap` measures what it costs |
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from engine.traces.analysis import replies
from engine.traces.doctor.causes import RERENDERED, SWAP, TOOL_CHANGED, TOOLS_AFTER, TRUNCATED, TTL, Span
from engine.traces.doctor.counterfactual import without_swap
from engine.traces.doctor.diagnosis import region_kind, request_spans
from engine.traces.doctor.history import append_only
from engine.traces.doctor.information import Kept, kept
from engine.traces.doctor.moves import changed_tools_last, move_volatile, pin_order, tools_first
from engine.traces.doctor.nonces import originals, per_session_nonce, session_values
from engine.traces.doctor.retention import gaps, is_copy, keep_alive, longer_ttl
from engine.traces.doctor.volatile import ID, REORDERED, TEXT_KINDS
from engine.traces.request import TraceRequest

Rewriter = Callable[[Sequence[TraceRequest], Sequence[Span]], list[TraceRequest]]

WHAT = {
    "move_volatile": "move the changing line after everything stable (into the newest turn)",
    "per_session_nonce": "send one nonce per session (its first request's) instead of one per request",
    "pin_order": "pin the order the trace first used",
    "append_only": "render the history append-only (the earlier rendering kept)",
    "tools_first": "render the tools before the system text",
    "changed_tools_last": "put the tools whose definition changes after those that never change",
    "longer_ttl": "ask for the longer retention the provider sells (Anthropic `ttl: 1h`, OpenAI `24h`)",
    "keep_alive": "send the session's latest request again every 4.5 min within a gap (up to 1 h)",
    "without_swap": "measured only: the trace as if the swap had not happened",
}
CANNOT = {
    "move_volatile": "the value's place: the model reads it in the newest turn, not the system prompt",
    "per_session_nonce": "each request's own nonce: the report names them",
    "pin_order": "",
    "append_only": "",
    "tools_first": "the template's own order (a serving-side change: the trace is rewritten to render it)",
    "changed_tools_last": "the tools' order; the request whose definition changed still recomputes from it on",
    "longer_ttl": "the price: 1-hour writes cost 2x the base input price (5-minute ones 1.25x)",
    "keep_alive": "nothing in the requests; the copies are requests of their own, paid as such",
    "without_swap": "the swapped-in model or system prompt: another model or prompt asks for something "
    "else, so it is not rewritten (this measures what the swap costs)",
}
NOT_PINNED = "; pinning the first definition would offer the model one the agent no longer has"
TRUNCATION_NOTE = "the window's or compaction's bound: the whole history is kept, so prompts grow"


@dataclass(frozen=True)
class Prescription:
    cause: str
    region: str
    rewrite: str  # a key of WHAT
    cannot_keep: str
    applied: bool = True  # a rewrite the trace can take (False: a measurement, never applied or written)


def prescriptions(cause: str, region: str) -> list[Prescription]:
    """What the doctor prescribes for a cause, the rewrite all fixes together apply first; [] where it knows
    none."""
    if cause == SWAP:
        return [Prescription(cause, region, "without_swap", CANNOT["without_swap"], applied=False)]
    if cause == TTL:
        return [Prescription(cause, region, n, CANNOT[n]) for n in ("longer_ttl", "keep_alive")]
    if cause == TOOL_CHANGED:
        return [Prescription(cause, region, "changed_tools_last", CANNOT["changed_tools_last"] + NOT_PINNED)]
    if cause == REORDERED:
        name = "pin_order"
    elif cause == TOOLS_AFTER:
        name = "tools_first"
    elif cause in (RERENDERED, TRUNCATED) or region == "history":
        name = "append_only"
    elif cause == ID and region == "system":
        name = "per_session_nonce"
    elif cause in TEXT_KINDS and region == "system":
        name = "move_volatile"
    else:
        return []
    note = TRUNCATION_NOTE if cause == TRUNCATED else CANNOT[name]
    return [Prescription(cause, region, name, note)]


def no_rewrite(cause: str, region: str) -> str:
    return f"a {cause} span in the {region}: no rewrite known"


REWRITERS: dict[str, Rewriter] = {
    "move_volatile": move_volatile,
    "per_session_nonce": per_session_nonce,
    "pin_order": pin_order,
    "append_only": append_only,
    "tools_first": tools_first,
    "changed_tools_last": changed_tools_last,
    "longer_ttl": longer_ttl,
    "keep_alive": keep_alive,
    "without_swap": without_swap,
}


@dataclass(frozen=True)
class Rewritten:
    requests: list[TraceRequest]
    kept: Kept
    note: str = ""  # a line for the report: what the rewrite replaced (the original nonces), the trace's gaps
    replaced: dict[int, list[tuple[str, str]]] = field(
        default_factory=dict
    )  # request -> (value, its replacement)


def rewrite(
    requests: Sequence[TraceRequest], cause: str, region: str, extra: Sequence[Span] = (), name: str = ""
) -> Rewritten | None:
    """The trace with `cause` (in `region`) rewritten away by its first prescription (or the one `name`d),
    the spans found again on `requests` (plus `extra`, those the rendering adds: tools after the break);
    None where the cause has none."""
    found = [p for p in prescriptions(cause, region) if p.rewrite == name or not name]
    if not found:
        return None
    spans = [
        s
        for s in [*request_spans(requests, replies(requests)), *extra]
        if s.cause == cause and region_kind(s.region) == region
    ]
    p = found[0]
    out = REWRITERS[p.rewrite](requests, spans)
    originals_at = [r for r in out if not is_copy(r)]
    if p.rewrite == "per_session_nonce":
        values = session_values(requests, spans)
        return Rewritten(out, kept(list(requests), out, values), originals(values), values)
    note = gaps(requests) if cause == TTL else ""
    return Rewritten(out, kept(list(requests), originals_at), note)
