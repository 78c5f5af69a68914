"""Which earlier request each request continues: the one its cache entries should come from, and the one
the miss reasons compare it with.

A request that names its parent (`parent_id`: Claude Code's chain of messages) continues the request with
that `request_id`; if the trace does not hold it, it continues none (`parent_missing` says so). Any other
request continues the latest earlier request of its session that opens with the same first non-system
message: a session's own conversation, apart from side requests a harness interleaves with it (a title,
a quota check) that open otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.traces.blocks import canonical
from engine.traces.request import TraceRequest


def _opening(req: TraceRequest) -> str:
    first = next((m for m in req.messages if m["role"] != "system"), None)
    return canonical(first) if first is not None else ""


def previous_requests(requests: Sequence[TraceRequest]) -> list[int | None]:
    """Per request (in the order given), the index of the request it continues, or None."""
    by_id = {r.request_id: i for i, r in enumerate(requests) if r.request_id is not None}
    latest: dict[tuple[str, str], int] = {}
    out: list[int | None] = []
    for i, req in enumerate(requests):
        if req.parent_id is not None or req.parent_missing:
            j = by_id.get(req.parent_id) if req.parent_id is not None else None
            out.append(j if j is not None and j < i else None)
        else:
            key = (req.session, _opening(req))
            out.append(latest.get(key))
            latest[key] = i
    return out
