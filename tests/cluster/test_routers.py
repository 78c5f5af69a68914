"""Where each router sends requests, on small hand-made traces."""

from __future__ import annotations

from collections import Counter

from engine.cluster.costs import CostModel
from engine.cluster.pools import LruPool
from engine.cluster.replica import Replica
from engine.cluster.routers import ROUTERS, RouterIndex, RouterSettings
from engine.cluster.simulate import ClusterConfig, simulate
from engine.cluster.workload import ClusterRequest, Pass, Workload

BLOCK = 4
FREE = CostModel("free", 0, 0, 0, 0, 0, 0, 1, 1)  # every request finishes as it arrives
SLOW = CostModel("slow", 10.0, 0, 0, 0, 0, 0, 1, 1)  # every prefill takes 10 s


def req(t: float, session: str, nodes: tuple[int, ...], output: int = 1) -> ClusterRequest:
    n = len(nodes)
    one = Pass(limit=n - 1, need=n + 1, publish=n)
    return ClusterRequest(t, session, n * BLOCK, output, nodes, n, (one,), nodes)


def placements(workload: Workload, router: str, replicas: int, cost: CostModel = FREE, **kw) -> list[int]:
    config = ClusterConfig(pool_blocks=64, settings=RouterSettings(**kw))
    return [s.replica for s in simulate(workload, router, replicas, config, cost).served]


def wl(*requests: ClusterRequest) -> Workload:
    return Workload("t", BLOCK, list(requests), "hash ids")


def test_round_robin_takes_turns_and_session_keeps_a_session_together() -> None:
    trace = wl(*(req(i, f"s{i % 3}", (100 + i,)) for i in range(9)))
    assert placements(trace, "round-robin", 3) == [0, 1, 2] * 3
    by_session = placements(trace, "session", 4)
    assert all(by_session[i] == by_session[i % 3] for i in range(9))


def test_least_loaded_avoids_the_busy_replica() -> None:
    # the first request keeps its replica busy for 10 s: the next ones go to the others
    trace = wl(req(0, "a", (1, 2)), req(1, "b", (3, 4)), req(2, "c", (5, 6)))
    first, second, _ = placements(trace, "least-loaded", 2, SLOW)
    assert second == 1 - first  # then both hold one: a tie, broken by the seeded draw


def test_prefix_aware_follows_the_prefix_and_yields_to_imbalance() -> None:
    shared = (1, 2, 3, 4)
    trace = wl(req(0, "a", shared), req(1, "b", (9, 8)), req(2, "c", (*shared, 5)))
    got = placements(trace, "prefix-aware", 2)
    assert got[2] == got[0] and got[1] != got[0]  # new prefix: the smaller tree; shared prefix: its replica
    # 3 requests in flight on one replica, none on the other: imbalanced (abs 1, rel 1.5), so the least loaded
    busy = wl(*(req(i * 0.1, f"s{i}", shared) for i in range(4)), req(1, "z", (*shared, 7)))
    got = placements(busy, "prefix-aware", 2, SLOW, balance_abs_threshold=1)
    assert got[4] != got[0]
    assert placements(busy, "prefix-aware", 2, SLOW)[4] == got[0]  # SGLang's default guard (64): affinity


def test_prefix_aware_below_the_cache_threshold_takes_the_smallest_tree() -> None:
    trace = wl(req(0, "a", (1, 2, 3, 4, 5, 6, 7, 8)), req(1, "b", (20,)), req(2, "c", (1, 30, 31, 32)))
    got = placements(trace, "prefix-aware", 2)  # request 3 matches 1 of 4 blocks on replica 0: 0.25 < 0.3
    assert got[2] == got[1] != got[0]


def test_approx_prefix_scores_its_own_index_and_the_load() -> None:
    shared = (1, 2, 3, 4)
    trace = wl(req(0, "a", shared), req(1, "b", (*shared, 5)))
    got = placements(trace, "approx-prefix", 3)
    assert got[1] == got[0]
    # with the prefix weighted 0 only the load counts: the queue of the first replica sends the next elsewhere
    got = placements(
        wl(req(0, "a", shared), req(1, "b", (*shared, 5))), "approx-prefix", 3, SLOW, prefix_weight=0
    )
    assert got[1] != got[0]


def test_kv_cost_weighs_cached_blocks_against_load() -> None:
    shared = tuple(range(1, 9))
    trace = wl(req(0, "a", shared, output=1), req(100, "b", (*shared, 9)))
    got = placements(trace, "kv-cost", 4)
    assert got[1] == got[0]  # 8 cached blocks: the cheapest prefill
    same = wl(*(req(i, f"s{i}", shared) for i in range(40)))
    assert len(set(placements(same, "kv-cost", 4))) == 1  # temperature 0: always the cheapest
    assert len(set(placements(same, "kv-cost", 4, temperature=10.0))) > 1  # softmax sampling spreads


def test_kv_cost_reads_the_pools_as_kv_events_report_them() -> None:
    pool = LruPool(16)
    rep = Replica(0, pool, None, FREE, BLOCK)
    r = req(0, "a", (1, 2, 3))
    assert rep.overlap(r) == 0
    rep.serve(r, 0.0)
    assert rep.overlap(req(1, "b", (1, 2, 3, 4))) == 3


def test_router_index_matches_every_replica_in_one_walk() -> None:
    ix = RouterIndex(3)
    ix.add(0, [1, 2, 3])
    ix.add(1, [1, 2])
    ix.add(2, [7])
    assert ix.matches((1, 2, 3, 4), 4) == [3, 2, 0]
    ix.trim(0, 1)  # keeps the most recently added: 3 (its prefix is gone, so nothing leads to it)
    assert ix.matches((1, 2, 3), 3) == [0, 2, 0]
    assert set(ix.owners) == {3, 1, 2, 7}


def test_every_router_is_deterministic_for_a_seed() -> None:
    trace = wl(*(req(i * 0.5, f"s{i % 5}", tuple(range(i % 4, i % 4 + 3))) for i in range(40)))
    for name in ROUTERS:
        assert placements(trace, name, 3, SLOW) == placements(trace, name, 3, SLOW)
        assert len(Counter(placements(trace, name, 3, SLOW))) >= 1
