"""A replica's clock: prefills one at a time in arrival order, CPU-tier loads before them, decode steps of
the batch decoding when a decode starts."""

from __future__ import annotations

import pytest

from engine.cluster.costs import CostModel
from engine.cluster.pools import CpuTier, LruPool
from engine.cluster.replica import Replica
from engine.cluster.workload import ClusterRequest, Pass

BLOCK = 4
# prefill: 1 s + 0.1 s per new token; decode step: 0.5 s + 0.25 s per sequence; load: 2 s per token
COST = CostModel("toy", 1.0, 0.1, 0.0, 0.5, 0.25, 0.0, 1.0, 0.5)


def req(t: float, nodes: tuple[int, ...], output: int) -> ClusterRequest:
    n = len(nodes)
    one = Pass(limit=n - 1, need=n + 1, publish=n)
    return ClusterRequest(t, "s", n * BLOCK, output, nodes, n, (one,), nodes)


def test_prefills_queue_first_come_first_served() -> None:
    rep = Replica(0, LruPool(64), None, COST, BLOCK)
    a = rep.serve(req(0.0, (1, 2), output=1), 0.0)  # 8 new tokens: 1.8 s
    b = rep.serve(req(1.0, (3, 4), output=1), 1.0)  # waits until 1.8, then 1.8 s
    assert (a.queue_s, a.prefill_s, a.ttft_s, a.end_s) == pytest.approx((0.0, 1.8, 1.8, 1.8))
    assert (b.queue_s, b.ttft_s, b.end_s) == pytest.approx((0.8, 2.6, 3.6))
    c = rep.serve(req(10.0, (1, 2, 5), output=1), 10.0)  # idle again; 2 blocks cached, 4 new tokens
    assert c.cached_tokens == 8 and (c.queue_s, c.prefill_s) == pytest.approx((0.0, 1.4))


def test_decode_steps_cost_the_batch_decoding_when_a_decode_starts() -> None:
    rep = Replica(0, LruPool(64), None, COST, BLOCK)
    a = rep.serve(req(0.0, (1,), output=5), 0.0)  # first token 1.4 s; 4 steps of a batch of 1: 0.75 s each
    assert a.end_s == pytest.approx(1.4 + 4 * 0.75)
    b = rep.serve(req(0.0, (2,), output=3), 0.0)  # first token 2.8 s, beside a: 2 steps of a batch of 2
    assert b.end_s == pytest.approx(2.8 + 2 * 1.0)
    rep.advance(3.0)
    assert (rep.in_flight, rep.waiting, rep.active_blocks) == (
        2,
        0,
        3 + 2,
    )  # 4+5 and 4+3 tokens: 3 and 2 blocks


def test_cpu_tier_blocks_are_loaded_not_computed() -> None:
    rep = Replica(0, LruPool(4), CpuTier(16), COST, BLOCK)
    rep.serve(req(0.0, (1, 2), output=1), 0.0)
    rep.serve(req(10.0, (7, 8), output=1), 10.0)  # 3 blocks, 2 empty: evicts block 2 (deepest) to the tier
    again = rep.serve(req(20.0, (1, 2, 9), output=1), 20.0)  # block 1 from the pool, block 2 from the tier
    assert (again.cached_tokens, again.tier_tokens) == (8, 4)
    assert again.load_s == pytest.approx(4 * 2.0) and again.prefill_s == pytest.approx(1.0 + 0.4)
