"""The provider's TTL or eviction: nothing in the requests changed, the cache let its entry go. The request
cannot be rewritten to fix that; what a provider allows can be prescribed, each measured by its rule:

- `longer_ttl`: Anthropic's 1-hour `cache_control` TTL on every breakpoint and on automatic caching (its
  writes cost 2x the base input price, not 1.25x), OpenAI's extended retention (`prompt_cache_retention:
  "24h"`), each read by its own rule;
- `keep_alive`: a copy of a session's latest request sent every KEEP_ALIVE_S seconds within a gap longer
  than that (each copy a cache read that refreshes the entry, paid as a request of its own), for gaps up to
  KEEP_ALIVE_LIMIT_S (longer ones are left to expire: the 1-hour TTL is the fix there).

`gaps` says what the trace's gaps between a session's requests are, against those intervals.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from engine.traces.doctor.causes import Span
from engine.traces.request import FIVE_MINUTES, ONE_HOUR, TraceRequest

KEEP_ALIVE_S = 270.0  # under the 5 minutes of Anthropic's default TTL and OpenAI's in-memory retention
KEEP_ALIVE_LIMIT_S = ONE_HOUR  # longest gap kept alive
KEEP_ALIVE = "keep_alive"  # meta key of an inserted copy


def longer_ttl(requests: Sequence[TraceRequest], spans: Sequence[Span]) -> list[TraceRequest]:
    return [
        replace(
            r,
            breakpoints=tuple(replace(b, ttl_s=ONE_HOUR) for b in r.breakpoints),
            auto_cache_ttl_s=ONE_HOUR if r.auto_cache_ttl_s is not None else None,
            cache_retention="24h",
        )
        for r in requests
    ]


def _session_gaps(requests: Sequence[TraceRequest]) -> list[tuple[int, float]]:
    """(request, seconds until the next request of its session), where both have a time."""
    last: dict[str, int] = {}
    out = []
    for i, r in enumerate(requests):
        p = last.get(r.session)
        if p is not None and r.timestamp is not None and requests[p].timestamp is not None:
            out.append((p, r.timestamp - requests[p].timestamp))
        last[r.session] = i
    return out


def keep_alive(requests: Sequence[TraceRequest], spans: Sequence[Span]) -> list[TraceRequest]:
    if any(r.timestamp is None for r in requests):
        return list(requests)
    placed = [(r.timestamp, i, 0, r) for i, r in enumerate(requests)]
    for i, gap in _session_gaps(requests):
        if KEEP_ALIVE_S < gap <= KEEP_ALIVE_LIMIT_S:
            r = requests[i]
            for k in range(1, math.ceil(gap / KEEP_ALIVE_S)):
                t = r.timestamp + k * KEEP_ALIVE_S
                placed.append((t, i, k, replace(r, timestamp=t, recorded=None, meta={KEEP_ALIVE: True})))
    return [r for *_, r in sorted(placed, key=lambda x: x[:3])]


def is_copy(req: TraceRequest) -> bool:
    """An inserted keep-alive copy (no request of the trace)."""
    return bool(req.meta.get(KEEP_ALIVE))


def gaps(requests: Sequence[TraceRequest]) -> str:
    """The trace's gaps between a session's requests, against the 5-minute TTL and the 1-hour one."""
    found = [g for _, g in _session_gaps(requests)]
    if not found:
        return "the trace gives no times between a session's requests"
    over = [g for g in found if g > FIVE_MINUTES]
    longest = max(found)
    hour = sum(g > ONE_HOUR for g in found)
    return (
        f"{len(over)} of {len(found)} gaps between a session's requests are over 5 min "
        f"(longest {longest / 60:.1f} min; {hour} over 1 h)"
    )
