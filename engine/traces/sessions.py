"""Several sessions in one cache: requests ordered by the time they were sent.

A request without a timestamp is taken as sent one second after its session's previous one (the first at
0 s): back to back, well inside every provider's retention, and interleaved round-robin with the other
sessions that lack timestamps.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.traces.request import TraceRequest


def request_times(requests: Sequence[TraceRequest]) -> list[float]:
    """When each request was sent, in seconds: its timestamp, or its index within its session."""
    turns: dict[str, int] = {}
    out = []
    for req in requests:
        turn = turns[req.session] = turns.get(req.session, -1) + 1
        out.append(req.timestamp if req.timestamp is not None else float(turn))
    return out


def interleave(requests: Sequence[TraceRequest]) -> list[TraceRequest]:
    """The requests in the order they were sent (ties keep the order given)."""
    times = request_times(requests)
    return [requests[i] for i in sorted(range(len(requests)), key=lambda i: (times[i], i))]
