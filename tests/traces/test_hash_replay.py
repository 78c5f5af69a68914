"""Hash-id traces through the engine's BlockManager: shared ids are reused block by block, the block of a
prompt's last token is recomputed, a partial block is never cached, capacity evicts, the sweep spans what
the largest request needs to what holds everything."""

from __future__ import annotations

from engine.traces import hash_replay
from engine.traces.eviction import FewestReusesBlockManager
from engine.traces.mooncake import HashRequest, HashTrace
from engine.traces.synthetic import synthetic_hash_trace

B = 512


def trace(*requests: tuple[int, list[int]]) -> HashTrace:
    return HashTrace(B, [HashRequest(float(t), n, 100, tuple(ids)) for t, (n, ids) in enumerate(requests)])


def test_reuse_is_per_block_and_never_the_last_one() -> None:
    t = trace((1100, [1, 2, 3]), (1100, [1, 2, 3]), (1536, [1, 2, 4]), (2048, [1, 2, 4, 5]))
    served = [s.cached_tokens for s in hash_replay.replay(t, 64)]
    # 2: block 3 was partial (never cached); 3: ids 1-2 reused, 4 is new; 4: 1-2-4 were full in request 3
    assert served == [0, 2 * B, 2 * B, 3 * B]


def test_capacity_evicts_least_recently_used() -> None:
    t = trace((1024, [1, 2]), (1024, [3, 4]), (1024, [5, 6]), (1024, [1, 2]))
    assert hash_replay.replay(t, 6)[3].cached_tokens == B  # [1, 2] held among 6 blocks
    small = hash_replay.replay(t, 3)
    assert small[3].cached_tokens == 0 and sum(s.evictions for s in small) > 0


def test_the_sweep_reaches_what_holds_everything() -> None:
    t = synthetic_hash_trace(12, seed=3)
    sizes = hash_replay.capacities(t, None)
    points = hash_replay.sweep(t, sizes)
    lru = [p for p in points if p.policy == "lru"]
    assert [p.cache_tokens for p in lru] == sizes and lru[-1].evictions == 0
    assert lru[0].hit_rate <= lru[-1].hit_rate and {p.policy for p in points} == {"lru", "fewest-reuses"}
    full = [s.cached_tokens for s in hash_replay.replay(t, sizes[-1] // B, FewestReusesBlockManager)]
    assert sum(full) / sum(r.input_length for r in t.requests) == lru[-1].hit_rate  # no pressure: they agree
