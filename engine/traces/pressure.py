"""Multi-session pressure: the hit rate of one local cache as its capacity shrinks, per eviction policy.

The interleaved requests (prompt ids and reply ids from an analysis) are served by the engine's
`BlockManager` at each capacity, with LRU eviction (the engine's) and with `FewestReusesBlockManager`.
The smallest capacity is the one the largest request needs; the largest, unless given, is what holds every
request's blocks at once (nothing evicted).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tqdm import tqdm

from engine.kv.block_manager import BlockManager
from engine.traces.eviction import FewestReusesBlockManager
from engine.traces.providers.base import RulePrompt
from engine.traces.providers.local import LocalRule

POLICIES: dict[str, type[BlockManager]] = {"lru": BlockManager, "fewest-reuses": FewestReusesBlockManager}


@dataclass(frozen=True)
class PressurePoint:
    policy: str
    cache_tokens: int
    hit_rate: float  # cached prompt tokens / prompt tokens, over all requests
    evictions: int


def _blocks(tokens: int, block_size: int) -> int:
    return -(-tokens // block_size)


def capacities(
    prompts: Sequence[tuple[Sequence[int], Sequence[int]]], block_size: int, top: int | None, points: int = 8
) -> list[int]:
    """Cache sizes in tokens, geometrically spaced, from what the largest request needs to `top`."""
    need = max(_blocks(len(ids) + max(len(reply) - 1, 0) + 1, block_size) for ids, reply in prompts)
    most = (
        _blocks(top, block_size)
        if top is not None
        else sum(_blocks(len(i) + len(r) + 1, block_size) for i, r in prompts)
    )
    most = max(most, need)
    sizes = {round(need * (most / need) ** (k / max(points - 1, 1))) for k in range(points)}
    return [b * block_size for b in sorted(sizes)]


def sweep(
    prompts: Sequence[tuple[Sequence[int], Sequence[int]]], block_size: int, sizes: Sequence[int]
) -> list[PressurePoint]:
    """Serve every (prompt, reply) at every cache size with every policy."""
    out = []
    total = sum(len(ids) for ids, _ in prompts)
    bar = tqdm(total=len(sizes) * len(POLICIES), desc="pressure", unit="run", leave=False)
    for size in sizes:
        for name, manager in POLICIES.items():
            rule = LocalRule(manager(size // block_size, block_size, b"pressure"))
            cached = sum(
                rule.serve(RulePrompt(ids, 0.0, reply_ids=reply)).cached_tokens for ids, reply in prompts
            )
            out.append(PressurePoint(name, size, cached / total, rule.blocks.stats.evictions))
            bar.update()
    bar.close()
    return out
