"""Several sessions in one cache: requests ordered by the time they were sent.

A request without a timestamp is taken as sent one second after its session's previous one (the first at
0 s): back to back, well inside every provider's retention, and interleaved round-robin with the other
sessions that lack timestamps. Within a session the requests keep the order they are given in (each one
extends the conversation of the one before), so a session's times must not go backwards in that order,
and a session gives every request a time or none: either is refused, naming the session and the requests.
Requests this project's server recorded with their engine steps keep the places of their run, in the order
its engine admitted them (so requests batched in one step are replayed as the engine served them).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from engine.errors import TraceError
from engine.traces.request import TraceRequest


def request_times(requests: Sequence[TraceRequest]) -> list[float]:
    """When each request was sent, in seconds: its timestamp, or its index within its session."""
    turns: dict[str, int] = {}
    out = []
    for req in requests:
        turn = turns[req.session] = turns.get(req.session, -1) + 1
        out.append(req.timestamp if req.timestamp is not None else float(turn))
    return out


def check_order(requests: Sequence[TraceRequest]) -> None:
    """Refuse a session whose times go backwards in the order given, or that times only some requests."""
    last: dict[str, tuple[int, float | None]] = {}  # session -> (its requests so far, the latest's time)
    for req in requests:
        n, before = last.get(req.session, (0, None))
        if n and (before is None) != (req.timestamp is None):
            timed, untimed = (n, n + 1) if before is not None else (n + 1, n)
            raise TraceError(
                f"session {req.session}: request {timed} has a timestamp and request {untimed} has none: "
                "give every request of a session a time, or none"
            )
        if before is not None and req.timestamp is not None and req.timestamp < before:
            raise TraceError(
                f"session {req.session}: request {n + 1} was sent at {_utc(req.timestamp)}, before request "
                f"{n} ({_utc(before)}): a session's requests must be in the order they were sent (sort "
                "the trace by time)"
            )
        last[req.session] = (n + 1, req.timestamp)


def interleave(requests: Sequence[TraceRequest]) -> list[TraceRequest]:
    """The requests in the order they were sent (ties keep the order given), sessions checked first; those
    one server's engine ran (recorded with `steps`), in the order it admitted them."""
    check_order(requests)
    times = request_times(requests)
    return admitted_order([requests[i] for i in sorted(range(len(requests)), key=lambda i: (times[i], i))])


def admitted_order(requests: Sequence[TraceRequest]) -> list[TraceRequest]:
    """`requests` with those of each server run (`ServedSteps.server`) in the order its engine admitted them
    (by step; in one step as given), in the places the given order has for that run's requests."""
    runs: dict[float, list[int]] = {}
    for i, req in enumerate(requests):
        if req.steps is not None:
            runs.setdefault(req.steps.server, []).append(i)
    out = list(requests)
    for places in runs.values():
        admitted = sorted(places, key=lambda i: (requests[i].steps.admitted, i))  # type: ignore[union-attr]
        for place, i in zip(places, admitted, strict=True):
            out[place] = requests[i]
    return out


def _utc(seconds: float) -> str:
    """A time as a reader sees it: ISO 8601 UTC for epoch seconds, plain seconds for relative ones."""
    if seconds < 10**8:  # before 1973: relative seconds, not a date
        return f"{seconds:g} s"
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).isoformat().replace("+00:00", "Z")
