"""Sessions interleaved by time: a session's requests keep their order, so times that go backwards within
a session, or a session that times only some of its requests, are refused naming the session; requests a server
recorded with their engine steps replay in the order its engine admitted them."""

from __future__ import annotations

import pytest

from engine.errors import TraceError
from engine.traces.request import ServedSteps, TraceRequest
from engine.traces.sessions import interleave


def session(name: str, *times: float | None) -> list[TraceRequest]:
    return [TraceRequest([], session=name, timestamp=t) for t in times]


def test_times_going_backwards_within_a_session_are_refused() -> None:
    with pytest.raises(
        TraceError,
        match=r"session s: request 2 was sent at 2026-11-30T09:00:00Z, before request 1 "
        r"\(2026-11-30T09:05:00Z\): a session's requests must be in the order they were sent",
    ):
        interleave(session("s", 1796029500.0, 1796029200.0))
    with pytest.raises(
        TraceError, match=r"session s: request 3 was sent at 100 s, before request 2 \(200 s\)"
    ):
        interleave(session("s", 0.0, 200.0, 100.0))


def test_a_session_times_every_request_or_none() -> None:
    with pytest.raises(TraceError, match="session s: request 1 has a timestamp and request 2 has none"):
        interleave(session("s", 5.0, None))
    with pytest.raises(TraceError, match="session s: request 3 has a timestamp and request 2 has none"):
        interleave(session("s", None, None, 5.0))


def test_equal_times_and_other_sessions_going_back_are_fine() -> None:
    a, b = session("a", 10.0, 10.0, 30.0), session("b", 5.0, 20.0)
    order = interleave(a + b)  # b starts before a's first request: interleaving, not going backwards
    assert [(r.session, r.timestamp) for r in order] == [
        ("b", 5.0),
        ("a", 10.0),
        ("a", 10.0),
        ("b", 20.0),
        ("a", 30.0),
    ]


def test_a_servers_requests_replay_in_the_order_its_engine_admitted_them() -> None:
    """Sent at 1, 2, 3 s but admitted in steps 5, 4, 4 (the first one's tokenizing took longest): their run's
    places in the time order hold them by step; another trace's request keeps its place between them."""

    def served(name: str, sent: float, step: int) -> TraceRequest:
        return TraceRequest([], session=name, timestamp=sent, steps=ServedSteps(100.0, step))

    a, b, c = served("a", 1.0, 5), served("b", 2.0, 4), served("c", 3.0, 4)
    other = TraceRequest([], session="other", timestamp=2.5)
    assert interleave([a, b, c, other]) == [b, c, other, a]
