"""The simulator's pools serve exactly as the engine's block manager: the same cached tokens and evictions,
request by request, with LRU and with fewest-reuses eviction, from ample capacity down to what the largest
request needs; and the CPU tier serves what the pool evicted."""

from __future__ import annotations

import pytest

from engine.cluster.pools import POOLS, CpuTier, LruPool
from engine.cluster.workload import Pass, hash_workload
from engine.traces import hash_replay
from engine.traces.mooncake import HashTrace
from engine.traces.pressure import POLICIES
from engine.traces.synthetic import synthetic_hash_trace


@pytest.mark.parametrize("policy", list(POOLS))
@pytest.mark.parametrize("share", [1.0, 0.2, 0.0])
def test_pool_serves_as_the_block_manager(policy: str, share: float) -> None:
    trace = synthetic_hash_trace(60, seed=3)
    sizes = hash_replay.capacities(trace, None)
    need, top = sizes[0] // trace.block_size, sizes[-1] // trace.block_size
    capacity = max(need, round(top * share))
    expected = [(s.cached_tokens, s.evictions) for s in hash_replay.replay(trace, capacity, POLICIES[policy])]
    pool, got = POOLS[policy](capacity), []
    for r in hash_workload("t", trace).requests:
        before = pool.evictions
        matched, _ = pool.serve(r.nodes, r.passes[0])
        got.append((matched * trace.block_size, pool.evictions - before))
    assert got == expected
    assert share == 1.0 or sum(e for _, e in got) > 0  # the small pools evict


def test_a_block_evicted_from_the_pool_is_found_in_the_cpu_tier() -> None:
    pool, tier = LruPool(4), CpuTier(8)
    a, b = (1, 2, 3, 4), (5, 6, 7, 8)
    one = Pass(limit=3, need=4, publish=4)
    assert pool.serve(a, one) == (0, [])
    matched, evicted = pool.serve(b, one)  # takes all four blocks: a's are evicted, deepest first
    assert matched == 0 and evicted == [4, 3, 2, 1]
    tier.put(evicted)
    assert pool.match(a, 3) == 0 and tier.match(a, 0, 3) == 3  # a's prefix: from the tier, not computed


def test_a_pool_smaller_than_a_request_is_refused() -> None:
    trace = HashTrace(4, synthetic_hash_trace(2, seed=0, block=4).requests[:1])
    r = hash_workload("t", trace).requests[0]
    with pytest.raises(Exception, match="--pool-tokens"):
        LruPool(r.passes[0].need - 1).serve(r.nodes, r.passes[0])
