"""One replica's prefix cache, on node ids, with exactly the engine's `BlockManager` semantics and far less
work per block (no hashing, no block objects): what lets the simulator serve 100,000 requests per router
and replica count in about a second.

A pass (`engine.cluster.workload.Pass`) is served as the block manager serves a sequence admitted, grown,
published and released at once:
- the lookup matches the leading blocks of the pass that are cached (at most `limit`); they are referenced,
  so nothing evicts them while the pass runs;
- the pass then takes `need - matched` blocks: empty ones first (the pool has `capacity - cached` of them),
  then cached ones in the policy's eviction order;
- its first `publish` blocks are stored, except one whose node is already cached (that copy stays where
  it is), and released last block first: a sequence's deepest block is nearest eviction.
With LRU that is `BlockManager`; with fewest-reuses, `engine.traces.eviction.FewestReusesBlockManager`
(tested equal, request by request, on the same traces).
"""

from __future__ import annotations

import heapq
from collections import OrderedDict

from engine.cluster.workload import Pass
from engine.errors import CacheCapacityError


def leading(nodes: tuple[int, ...], cached: object, limit: int) -> int:
    """How many of the first `limit` nodes are in `cached`, counted from the start to the first that is not."""
    m = 0
    for node in nodes[:limit]:
        if node not in cached:  # type: ignore[operator]
            break
        m += 1
    return m


class LruPool:
    policy = "lru"

    def __init__(self, capacity_blocks: int) -> None:
        self.capacity = capacity_blocks
        self.cached: OrderedDict[int, None] = OrderedDict()  # free but reusable, least recently used first
        self.evictions = 0

    def match(self, nodes: tuple[int, ...], limit: int) -> int:
        return leading(nodes, self.cached, limit)

    def serve(self, nodes: tuple[int, ...], p: Pass) -> tuple[int, list[int]]:
        """One pass (see the module docstring): (blocks matched, nodes evicted)."""
        if p.need > self.capacity:
            raise CacheCapacityError(
                f"a request holds {p.need} blocks at once; each replica's pool has {self.capacity}: "
                "give --pool-tokens at least what the largest request needs"
            )
        cached = self.cached
        m = leading(nodes, cached, p.limit)
        evict = p.need - self.capacity + len(cached) - m  # blocks to take beyond the empty ones
        evicted: list[int] = []
        if evict > 0:
            for node in nodes[:m]:  # referenced: not evictable while the pass runs
                del cached[node]
            evicted = [cached.popitem(last=False)[0] for _ in range(evict)]
            self.evictions += evict
        for i in range(max(p.publish, m) - 1, -1, -1):  # released last block first
            node = nodes[i]
            if i < m:
                cached[node] = None
                cached.move_to_end(node)
            elif node not in cached:  # an equal block already cached stays where it is
                cached[node] = None
        return m, evicted


class FewestReusesPool(LruPool):
    """Evicts the cached block the fewest requests reused since it was stored, the deepest of those first,
    the least recently freed among ties (`FewestReusesBlockManager`)."""

    policy = "fewest-reuses"

    def __init__(self, capacity_blocks: int) -> None:
        super().__init__(capacity_blocks)
        self.reuses: dict[int, int] = {}
        self.version: dict[int, int] = {}  # heap entries of an older version are stale
        self.heap: list[tuple[int, int, int, int]] = []  # (reuses, -depth, order, node) of freed blocks
        self.order = 0

    def serve(self, nodes: tuple[int, ...], p: Pass) -> tuple[int, list[int]]:
        if p.need > self.capacity:
            return super().serve(nodes, p)  # refused there
        cached, reuses = self.cached, self.reuses
        m = leading(nodes, cached, p.limit)
        for node in nodes[:m]:
            del cached[node]
            reuses[node] = reuses.get(node, 0) + 1
        evicted = self._victims(p.need - self.capacity + len(cached))
        for i in range(max(p.publish, m) - 1, -1, -1):
            node = nodes[i]
            if i < m or node not in cached:
                cached[node] = None
                self.version[node] = self.order
                heapq.heappush(self.heap, (reuses.get(node, 0), -i, self.order, node))
                self.order += 1
        return m, evicted

    def _victims(self, count: int) -> list[int]:
        out: list[int] = []
        while len(out) < count:
            _, _, order, node = heapq.heappop(self.heap)
            if node in self.cached and self.version[node] == order:
                del self.cached[node]
                self.reuses.pop(node, None)
                out.append(node)
        self.evictions += len(out)
        return out


POOLS: dict[str, type[LruPool]] = {"lru": LruPool, "fewest-reuses": FewestReusesPool}


class CpuTier:
    """A second, larger tier (host memory) behind a replica's pool: blocks evicted from the pool are written
    here (LRU, `capacity` blocks); a lookup that ends in the pool goes on here, and the blocks found are
    loaded back over the host link instead of computed (they stay here too)."""

    def __init__(self, capacity_blocks: int) -> None:
        self.capacity = capacity_blocks
        self.cached: OrderedDict[int, None] = OrderedDict()
        self.evictions = 0

    def match(self, nodes: tuple[int, ...], start: int, limit: int) -> int:
        """Blocks found here right after the `start` ones the pool matched, touched (most recently used)."""
        found = leading(nodes[start:], self.cached, limit - start)
        for node in nodes[start : start + found]:
            self.cached.move_to_end(node)
        return found

    def put(self, nodes: list[int]) -> None:
        for node in nodes:
            self.cached[node] = None
            self.cached.move_to_end(node)
        while len(self.cached) > self.capacity:
            self.cached.popitem(last=False)
            self.evictions += 1
