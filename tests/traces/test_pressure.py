"""Multi-session pressure: interleaving by time, the fewest-reuses eviction policy, the capacity sweep."""

from __future__ import annotations

from engine.kv.block_manager import BlockManager
from engine.traces.eviction import FewestReusesBlockManager
from engine.traces.pressure import capacities, sweep
from engine.traces.providers.base import RulePrompt
from engine.traces.providers.local import LocalRule
from engine.traces.request import TraceRequest
from engine.traces.sessions import interleave, request_times

SHARED = list(range(64))  # 4 blocks every session starts with


def tokens(start: int, n: int) -> list[int]:
    return list(range(start, start + n))


def served(manager: type[BlockManager], prompts: list[list[int]], blocks: int = 12) -> list[int]:
    rule = LocalRule(manager(blocks, 16, b"t"))
    return [rule.serve(RulePrompt(ids, 0.0)).cached_tokens for ids in prompts]


def test_fewest_reuses_keeps_the_shared_prefix_that_lru_evicts() -> None:
    prompts = [
        SHARED + tokens(1000, 33),
        SHARED + tokens(2000, 33),  # the shared prefix is reused once
        tokens(3000, 97),
        tokens(4000, 97),  # two one-off requests fill the cache
        SHARED + tokens(5000, 33),
    ]
    lru, fewest = served(BlockManager, prompts), served(FewestReusesBlockManager, prompts)
    assert lru[:2] == fewest[:2] == [0, 64]
    assert lru[4] == 0 and fewest[4] == 64


def test_without_pressure_the_policies_agree() -> None:
    prompts = [SHARED + tokens(1000 * k, 40) for k in range(1, 6)] + [SHARED + tokens(1000, 60)]
    assert served(BlockManager, prompts, 64) == served(FewestReusesBlockManager, prompts, 64)


def test_requests_interleave_by_time() -> None:
    a = [TraceRequest([], session="a", timestamp=t) for t in (0.0, 10.0, 20.0)]
    b = [TraceRequest([], session="b", timestamp=t) for t in (5.0, 6.0)]
    untimed = [TraceRequest([], session="c"), TraceRequest([], session="c")]
    order = interleave(a + b + untimed)
    assert [(r.session, r.timestamp) for r in order] == [
        ("a", 0.0),
        ("c", None),
        ("c", None),
        ("b", 5.0),
        ("b", 6.0),
        ("a", 10.0),
        ("a", 20.0),
    ]
    assert request_times(untimed) == [0.0, 1.0]


def test_sweep_spans_from_the_largest_request_to_no_eviction() -> None:
    prompts = [(SHARED + tokens(1000 * k, 40), tokens(9000 + k * 100, 20)) for k in range(1, 9)]
    sizes = capacities(prompts, 16, None, points=4)
    assert sizes[0] == 16 * 8  # 104 prompt + 19 reply tokens + 1 need 8 blocks
    points = sweep(prompts, 16, sizes)
    lru = [p for p in points if p.policy == "lru"]
    assert [p.cache_tokens for p in lru] == sizes and lru[-1].evictions == 0
    assert lru[0].hit_rate <= lru[-1].hit_rate and lru[-1].hit_rate == 7 * 64 / sum(
        len(i) for i, _ in prompts
    )
