"""The doctor names each cause from small traces of one cause each, and its rewrite leaves no break."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engine.traces.analysis import replies
from engine.traces.blocks import derived_blocks
from engine.traces.doctor.causes import RERENDERED, SWAP, TOOL_CHANGED, TRUNCATED, TTL
from engine.traces.doctor.diagnosis import compared_requests, findings, request_spans
from engine.traces.doctor.information import kept
from engine.traces.doctor.prescriptions import prescriptions, rewrite
from engine.traces.doctor.volatile import CLOCK, COUNTER, ID, PATH, REORDERED
from engine.traces.request import Breakpoint
from tests.traces.doctor import small_traces as st

CASES = [
    (st.clock_trace, CLOCK, "system"),
    (st.path_trace, PATH, "system"),
    (st.nonce_trace, ID, "system"),
    (st.counter_trace, COUNTER, "system"),
    (st.reordered_tools_trace, REORDERED, "tools"),
    (st.rerendered_trace, RERENDERED, "history"),
    (st.window_trace, TRUNCATED, "history"),
    (st.model_swap_trace, SWAP, "model"),
    (st.tool_change_trace, TOOL_CHANGED, "tools"),
]


def diagnosed(requests):
    return findings(request_spans(requests, replies(requests)))


@pytest.mark.parametrize(("make", "cause", "region"), CASES, ids=[c[1] for c in CASES])
def test_each_cause_is_named_alone(make, cause, region) -> None:
    found = diagnosed(make())
    assert [(f.cause, f.region) for f in found] == [(cause, region)]
    first = {RERENDERED: 2, TRUNCATED: 2}.get(cause, 1)  # the request that first breaks (0-based)
    assert found[0].requests == list(range(first, len(make())))


def test_a_clock_span_reads_whole_and_sits_where_it_changed() -> None:
    span = diagnosed(st.clock_trace())[0].spans[0]
    assert (span.before, span.after) == ("15:00:00", "15:01:00")
    assert span.lead.endswith("2024-05-15 ") and span.char == len("The current time is 2024-05-15 ")


FIXABLE = [c for c in CASES if c[1] not in (SWAP, TOOL_CHANGED)]


@pytest.mark.parametrize(("make", "cause", "region"), FIXABLE, ids=[c[1] for c in FIXABLE])
def test_each_rewrite_leaves_no_break_and_keeps_every_line(make, cause, region) -> None:
    requests = make()
    done = rewrite(requests, cause, region)
    assert done is not None and done.kept.missing == 0
    assert kept(requests, done.requests, done.replaced).missing == 0
    assert diagnosed(done.requests) == []


def test_a_swap_is_not_rewritten_but_its_cost_is_the_trace_without_it() -> None:
    (rx,) = prescriptions(SWAP, "model")
    assert rx.rewrite == "without_swap" and not rx.applied
    assert [r.model for r in rewrite(st.model_swap_trace(), SWAP, "model").requests] == ["model-a"] * 2
    other = "Completely other instructions, for another agent that sells insurance policies."
    swapped = st.trace([st.RULES, other, other])
    assert [(f.cause, f.region) for f in diagnosed(swapped)] == [(SWAP, "system")]
    done = rewrite(swapped, SWAP, "system")
    assert [r.messages[0]["content"] for r in done.requests] == [
        st.RULES
    ] * 3  # the swap's later requests too
    assert diagnosed(done.requests) == [] and done.kept.missing == 2


def test_a_changed_tool_goes_after_the_tools_that_never_change() -> None:
    requests = st.tool_change_trace()
    done = rewrite(requests, TOOL_CHANGED, "tools")
    names = [[t["function"]["name"] for t in r.tools] for r in done.requests]
    assert names == [["get_order", "issue_refund", "track_parcel"]] * 2
    assert done.requests[1].tools[2]["function"]["description"] == "track it"  # as the request sent it
    assert done.kept.missing == 0
    assert "pinning the first definition" in prescriptions(TOOL_CHANGED, "tools")[0].cannot_keep


def test_a_per_request_nonce_becomes_its_sessions_first_and_the_report_names_the_originals() -> None:
    requests = st.nonce_trace()
    requests[2:] = [replace(requests[2], session="other")]
    done = rewrite(requests, ID, "system")
    systems = [r.messages[0]["content"].split("\n")[0] for r in done.requests]
    assert systems == ["x-billing-header: cch=a3f9c2e1;", "x-billing-header: cch=a3f9c2e1;"] + [
        "x-billing-header: cch=c81e9a07;"  # the other session's first request keeps its own
    ]
    assert done.note == "original nonces per request: 1 `cch=a3f9c2e1;`, 2 `cch=7b0d44fe;`, 3 `cch=c81e9a07;`"
    assert (done.kept.missing, done.kept.named) == (0, 1)


def test_a_volatile_line_moves_into_the_newest_turn_and_stays_there() -> None:
    done = rewrite(st.clock_trace(), CLOCK, "system").requests
    assert all("current time" not in r.messages[0]["content"] for r in done)
    last = done[-1].messages
    notes = [m["content"] for m in last if "current time" in m["content"]]
    assert len(notes) == 4 and notes[-1].endswith("15:03:00 EST.")
    assert kept(st.clock_trace(), done).added == 6  # the earlier times, kept in the history


def test_an_unchanged_request_a_cache_missed_is_its_ttl() -> None:
    requests = st.trace([st.RULES] * 2)
    assert diagnosed(requests) == []
    spans = request_spans(requests, replies(requests), {1: "anthropic: ttl_expired (1024 tokens)"})
    assert [(s.request, s.cause, s.region) for s in spans] == [(1, TTL, "cache")]


def test_a_ttl_gets_the_longer_retention_or_keep_alive_copies_and_the_gaps_are_said() -> None:
    requests = [
        replace(r, timestamp=t, breakpoints=(Breakpoint(3),))
        for r, t in zip(st.trace([st.RULES] * 3), [0.0, 600.0, 8000.0], strict=True)
    ]
    assert [p.rewrite for p in prescriptions(TTL, "cache")] == ["longer_ttl", "keep_alive"]
    longer = rewrite(requests, TTL, "cache")
    assert {(b.ttl_s, r.cache_retention) for r in longer.requests for b in r.breakpoints} == {(3600.0, "24h")}
    assert (
        longer.note
        == "2 of 2 gaps between a session's requests are over 5 min (longest 123.3 min; 1 over 1 h)"
    )
    alive = rewrite(requests, TTL, "cache", name="keep_alive").requests
    assert [r.timestamp for r in alive] == [0.0, 270.0, 540.0, 600.0, 8000.0]  # the 2 h gap is left to expire
    assert [r.messages for r in alive[:3]] == [requests[0].messages] * 3


def test_breakpoints_of_a_rewritten_request_mark_its_stable_part_and_its_end() -> None:
    requests = [replace(r, breakpoints=(Breakpoint(3, 3600.0), Breakpoint(4))) for r in st.clock_trace()]
    done = rewrite(requests, CLOCK, "system").requests
    stable = len(st.TOOLS)  # three tools, then the system block
    assert [b.block for b in done[2].breakpoints] == [stable, len(derived_blocks(done[2])) - 1]
    assert {b.ttl_s for b in done[2].breakpoints} == {300.0}


def test_a_request_that_continues_none_is_compared_with_its_sessions_latest_on_a_tie() -> None:
    h = st.conversation(5)  # a window of two messages: each request opens with another message
    requests = st.trace([st.RULES] * 4, histories=[h[1][-3:], h[2][-3:], h[3][-3:], h[4][-3:]])
    other = replace(requests[0], session="other")
    assert compared_requests([other, *requests])[1:] == [0, 1, 2, 3]
