"""Which request each continues: named parents first, else the latest of its session with the same opening
message (side requests a harness interleaves form chains of their own)."""

from __future__ import annotations

from engine.traces.chains import previous_requests
from engine.traces.request import TraceRequest


def req(opening: str, session: str = "s", **kw) -> TraceRequest:
    return TraceRequest(
        [{"role": "system", "content": "sys"}, {"role": "user", "content": opening}], session=session, **kw
    )


def test_sessions_and_openings() -> None:
    requests = [req("fix it"), req("quota"), req("fix it"), req("fix it", "other"), req("fix it")]
    assert previous_requests(requests) == [None, None, 0, None, 2]


def test_named_parents() -> None:
    requests = [
        req("a", request_id="m1"),
        req("b", "resumed", request_id="m2", parent_id="m1"),
        req("c", request_id="m3", parent_id="gone"),
        req("d", parent_missing=True),
    ]
    assert previous_requests(requests) == [None, 0, None, None]
