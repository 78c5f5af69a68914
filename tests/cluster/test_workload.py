"""Requests as blocks: hash ids chained as the engine chains them, the passes of a request with text, and
sessions inferred where a hash-id trace names none."""

from __future__ import annotations

from engine.cluster.workload import TokenPrompt, hash_workload, timestamp_first, token_workload
from engine.traces.mooncake import HashRequest, HashTrace


def test_equal_ids_after_different_parents_are_different_blocks() -> None:
    trace = HashTrace(
        4, [HashRequest(0, 8, 1, (1, 2)), HashRequest(1, 8, 1, (3, 2)), HashRequest(2, 8, 1, (1, 2))]
    )
    a, b, c = (r.nodes for r in hash_workload("t", trace).requests)
    assert a == c and a[1] != b[1]


def test_sessions_are_inferred_from_continuations() -> None:
    shared = (1, 2)
    trace = HashTrace(
        4,
        [
            HashRequest(0, 10, 3, (*shared, 10)),  # session A: stores blocks 1, 2
            HashRequest(1, 12, 2, (*shared, 20)),  # B: same system prompt, too short to continue A (10 + 3)
            HashRequest(2, 15, 2, (*shared, 11, 12)),  # A again: holds A's stored blocks and is long enough
            HashRequest(3, 19, 2, (*shared, 11, 12, 13)),  # continues the request before: A
        ],
    )
    sessions = [r.session for r in hash_workload("t", trace).requests]
    assert sessions[0] == sessions[2] == sessions[3] != sessions[1]


def test_a_request_with_text_has_a_prompt_pass_and_a_reply_pass() -> None:
    ids, reply = list(range(10)), [100, 101, 102]
    (r,) = token_workload("t", [TokenPrompt(0.0, "s", ids, reply, "x" * 200, 3)], 4).requests
    first, second = r.passes
    assert (first.limit, first.need, first.publish) == (2, 3, 2)  # 10 tokens: blocks 0-1 full, 2 partial
    assert (second.limit, second.need, second.publish) == (2, 3, 3)  # + 2 reply tokens: 12, three full blocks
    assert len(r.nodes) == 3 and r.prompt_blocks == 2 and len(r.router_keys) == 200 // 64


def test_timestamp_first_shares_nothing() -> None:
    trace = HashTrace(4, [HashRequest(0, 8, 1, (1, 2)), HashRequest(1, 8, 1, (1, 2))])
    a, b = timestamp_first(hash_workload("t", trace)).requests
    assert not set(a.nodes) & set(b.nodes) and len(a.nodes) == 2
