"""A whole trace diagnosed: every request whose prefix broke, compared with the request it continues (a
session's first request with the closest earlier prompt, as the server compares them), its spans named
(`engine.traces.doctor.causes`), and the causes gathered over the trace.

Two causes come from what a cache did rather than from the two requests: `ttl_or_eviction`, a request that
changed nothing its cache had kept yet was served less than it could have been (the rule let the entry
expire, or evicted it); `tools_after_break` is added where the prompt is rendered (the bench's analysis).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from engine.prompts.messages import Message
from engine.prompts.regions import common_prefix
from engine.traces.blocks import canonical
from engine.traces.chains import previous_requests
from engine.traces.doctor.causes import TTL, Span, pair_spans
from engine.traces.request import TraceRequest

CACHE_SIDE = ("ttl_expired", "evicted", "beyond_lookback")  # miss reasons where nothing changed


def region_kind(region: str) -> str:
    """A span's region as the causes group it: model, tools, system, history, cache."""
    if region.startswith("tool"):
        return "tools"
    if region.startswith("message"):
        return "history"
    return region


@dataclass
class Finding:
    """One cause across the trace: where it lies, the requests it broke, their spans."""

    cause: str
    region: str  # region_kind
    requests: list[int] = field(default_factory=list)  # trace indices, ascending
    spans: list[Span] = field(default_factory=list)


def _shared_parts(a: TraceRequest, b: TraceRequest) -> int:
    """How many leading parts (the tools, then each message) two requests share."""
    if (a.tools or []) != (b.tools or []):
        return 0
    n = next((i for i, (x, y) in enumerate(zip(a.messages, b.messages, strict=False)) if x != y), None)
    return 1 + (n if n is not None else min(len(a.messages), len(b.messages)))


def compared_requests(requests: Sequence[TraceRequest]) -> list[int | None]:
    """Per request, the one it is compared with: the request it continues, else the earlier request it
    shares the most leading parts with (the tools, then whole messages), on a tie one of its own session,
    then the latest; None for the first, or when no earlier request's text shares a beginning with it."""
    previous = previous_requests(requests)
    flat = [canonical([r.tools or [], r.messages]) for r in requests]
    out: list[int | None] = []
    for i, p in enumerate(previous):
        if p is None and i:
            req = requests[i]
            candidates = [j for j in range(i) if requests[j].messages and common_prefix(flat[j], flat[i]) > 0]
            p = max(
                candidates,
                key=lambda j: (_shared_parts(requests[j], req), requests[j].session == req.session, j),
                default=None,
            )
        out.append(p)
    return out


def request_spans(
    requests: Sequence[TraceRequest],
    replies: Sequence[Message | None],
    cache_misses: dict[int, str] | None = None,
) -> list[Span]:
    """The named spans of every request that broke its prefix, in trace order. `cache_misses`: request
    index -> a cache-side miss reason (CACHE_SIDE) a cache gave it, for requests that changed nothing."""
    compared = compared_requests(requests)
    spans: list[Span] = []
    for i, (req, p) in enumerate(zip(requests, compared, strict=True)):
        if p is None or not req.messages:
            continue
        found = pair_spans(requests[p], replies[p], req, i, p)
        if not found and cache_misses and i in cache_misses:
            found = [Span(i, p, "cache", TTL, -1, "held", cache_misses[i])]
        spans += found
    return spans


def findings(spans: Sequence[Span]) -> list[Finding]:
    """The spans gathered by cause and region kind, the cause that broke most requests first."""
    by: dict[tuple[str, str], Finding] = {}
    for s in spans:
        key = (s.cause, region_kind(s.region))
        f = by.setdefault(key, Finding(*key))
        if s.request not in f.requests:
            f.requests.append(s.request)
        f.spans.append(s)
    return sorted(by.values(), key=lambda f: (-len(f.requests), f.requests[0]))
