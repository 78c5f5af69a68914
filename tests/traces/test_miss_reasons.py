"""Where a miss came from: each category from a pair of requests and what a cache served."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engine.traces.miss_reasons import CacheOutcome, divergence, miss_reason
from engine.traces.request import TraceRequest

TOOLS = [{"type": "function", "function": {"name": "read_file"}}]
P = TraceRequest(
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}], TOOLS, model="m1"
)
R = replace(
    P, messages=[*P.messages, {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "More"}]
)


@pytest.mark.parametrize(
    ("current", "reason"),
    [
        (replace(R, model="m2"), "model_changed"),
        (replace(R, tools=[]), "tools_changed"),
        (replace(R, messages=[{"role": "system", "content": "Be long."}, *R.messages[1:]]), "system_changed"),
        (
            replace(R, messages=[R.messages[0], {"role": "user", "content": "Hey"}, *R.messages[2:]]),
            "messages_changed",
        ),
        (replace(R, messages=R.messages[:1]), "messages_changed"),  # cut (compacted)
        (R, None),
    ],
)
def test_divergence_in_cache_key_order(current: TraceRequest, reason: str | None) -> None:
    assert divergence(P, current) == reason


def outcome(cached: int, held: int = 1000, **kw) -> CacheOutcome:
    return CacheOutcome(prompt_tokens=1200, cached_tokens=cached, held_tokens=held, **kw)


def test_no_miss_when_served_what_was_held() -> None:
    assert miss_reason(P, R, outcome(1000)) is None
    assert miss_reason(P, R, outcome(1000, shared_tokens=800)) is None  # the rest is not shared anyway


def test_first_request_and_unmatched_parents() -> None:
    assert miss_reason(None, R, outcome(0)).reason == "first_request"
    assert miss_reason(None, R, outcome(0)).missed_tokens == 1200
    assert (
        miss_reason(None, replace(R, parent_missing=True), outcome(0)).reason == "previous_message_not_found"
    )
    assert miss_reason(None, R, outcome(64)) is None  # another session's entries served it


def test_a_change_explains_the_shortfall() -> None:
    miss = miss_reason(P, replace(R, tools=[]), outcome(0))
    assert (miss.reason, miss.missed_tokens) == ("tools_changed", 1000)


@pytest.mark.parametrize(
    ("kw", "reason"),
    [
        ({"unreached": "ttl_expired"}, "ttl_expired"),
        ({"unreached": "beyond_lookback"}, "beyond_lookback"),
        ({}, "evicted"),
    ],
)
def test_cache_side_reasons(kw: dict, reason: str) -> None:
    miss = miss_reason(P, R, outcome(200, held=1000, shared_tokens=1100, unit=16, **kw))
    assert (miss.reason, miss.missed_tokens) == (reason, 992 - 200)  # what was held, in whole blocks


def test_a_shortfall_within_the_unit_is_no_miss() -> None:
    assert miss_reason(P, R, outcome(896, held=1000, shared_tokens=1000, unit=128)) is None


def test_below_minimum() -> None:
    miss = miss_reason(P, R, outcome(0, held=0, shared_tokens=700, below_minimum=True))
    assert (miss.reason, miss.missed_tokens) == ("below_minimum", 700)
    assert miss_reason(P, R, outcome(0, held=0, shared_tokens=0, below_minimum=True)) is None


def test_usage_only_requests_name_what_they_can() -> None:
    bare_p, bare_r = replace(P, messages=[]), replace(R, messages=[])
    assert miss_reason(bare_p, bare_r, outcome(0, unreached="ttl_expired")).reason == "ttl_expired"
    assert miss_reason(bare_p, bare_r, outcome(0)).reason == "unavailable"
