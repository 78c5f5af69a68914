"""A per-request nonce made per-session: each id / nonce span of the system prompt (a billing header's
`cch=`, a request id) takes, in every request of a session, the value the session's first request sent, so
the system prompt stays the same from request to request and the cache keeps it.

The value a request sent is not kept in the request: the report names the original nonces per request in
one line (`originals`), and the information check counts each replaced line as named there, not lost.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.traces.doctor.causes import Span
from engine.traces.doctor.moves import leading_system, with_messages
from engine.traces.request import TraceRequest

Replacements = dict[int, list[tuple[str, str]]]  # request -> (the value it sent, its session's value)


def session_values(requests: Sequence[TraceRequest], spans: Sequence[Span]) -> Replacements:
    """Per request holding a system id / nonce span: each such value (in the order of the request's spans)
    and the value its session's first request sent in the same place."""
    placed = sorted((s for s in spans if s.region == "system" and s.char >= 0), key=lambda s: s.request)
    sent: dict[int, list[str]] = {}
    for s in placed:
        sent.setdefault(s.request, []).append(s.after)
    for s in placed:  # the request each was compared with sent the `before` side
        if s.compared not in sent:
            sent[s.compared] = [t.before for t in placed if t.request == s.request]
    first: dict[tuple[str, int], str] = {}
    for i in sorted(sent):
        for k, value in enumerate(sent[i]):
            first.setdefault((requests[i].session, k), value)
    return {i: [(v, first[requests[i].session, k]) for k, v in enumerate(vs)] for i, vs in sent.items()}


def per_session_nonce(requests: Sequence[TraceRequest], spans: Sequence[Span]) -> list[TraceRequest]:
    values = session_values(requests, spans)
    out = []
    for i, req in enumerate(requests):
        swaps = [(v, s) for v, s in values.get(i, []) if v != s]
        if not swaps:
            out.append(req)
            continue
        lead = len(leading_system(req.messages))
        messages = [dict(m) for m in req.messages]
        for value, session_value in swaps:
            m = next((m for m in messages[:lead] if value in str(m.get("content") or "")), None)
            if m is not None:
                m["content"] = str(m["content"]).replace(value, session_value, 1)
        out.append(with_messages(req, messages))
    return out


def originals(values: Replacements) -> str:
    """The one report line naming the nonce each request sent (1-based, trace order)."""
    named = [f"{i + 1} `{' '.join(v for v, _ in values[i])}`" for i in sorted(values)]
    return "original nonces per request: " + ", ".join(named) if named else ""
