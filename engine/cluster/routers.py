"""The routing policies of serving stacks, as their documentation and code describe them, over the
simulator's replicas. Each picks a replica for a request at its arrival; ties go to a seeded random choice
among the tied replicas (as llm-d's max-score picker shuffles), so a run is deterministic.

- `round-robin`: in turn.
- `least-loaded`: fewest requests in flight (routed and not finished).
- `session`: a stable hash of the session id (vLLM production-stack's session router; hash-id traces name
  no sessions, so theirs are inferred: `engine.cluster.workload.infer_sessions`).
- `prefix-aware`: SGLang's `cache_aware` router. When the load is imbalanced (max - min in-flight requests >
  `balance_abs_threshold` and max > `balance_rel_threshold` x min), the least loaded replica; else the
  replica whose approximate tree holds the longest prefix of the prompt if its match rate (matched / prompt
  blocks) exceeds `cache_threshold`, else the replica with the smallest tree. The tree is the router's own
  record of the prompts it sent to each replica (it never sees evictions), trimmed to `max_tree_size`
  every `eviction_interval_s` of trace time, least recently used first. Matched in the engine's blocks
  (SGLang matches characters); sizes in characters at 4 per token.
- `approx-prefix`: llm-d's approximate prefix scorer: each replica's LRU index (`lru_capacity` entries) of
  the blocks the router sent there (text traces: the rendered prompt in 64-character blocks, chained, at
  most 256; hash-id traces: the ids), scored matched / request blocks, weighted with the queue scorer
  ((max - waiting) / (max - min) waiting requests) and the KV-cache utilization scorer (1 - blocks held by
  requests in flight / pool) as llm-d's inference-scheduling guide sets them (3, 2, 2); the highest sum.
- `kv-cost`: NVIDIA Dynamo's KV router: the replicas' cached blocks as KV events report them (exact: the
  pool and CPU tier), cost = `overlap_weight` x prefill blocks (the request's uncached blocks plus the
  prefill still ahead of it there) + decode blocks (those held by requests in flight, and the request's);
  the lowest cost, or with `temperature` > 0 a softmax sample of the costs scaled to [0, 1].
"""

from __future__ import annotations

import hashlib
import math
import random
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.cluster.workload import ClusterRequest

if TYPE_CHECKING:
    from engine.cluster.replica import Replica

CHARS_PER_TOKEN = 4  # llm-d's and SGLang's estimate where the router does not tokenize


@dataclass(frozen=True)
class RouterSettings:
    cache_threshold: float = 0.3  # SGLang router defaults (sglang_router RouterArgs)
    balance_abs_threshold: int = 64
    balance_rel_threshold: float = 1.5
    eviction_interval_s: float = 120.0
    max_tree_size: int = 2**26  # characters per replica's tree
    lru_capacity: int = 31_250  # llm-d's LRUCapacityPerServer (entries)
    prefix_weight: float = 3.0  # llm-d inference-scheduling guide: prefix-cache-scorer
    queue_weight: float = 2.0  # queue-scorer
    kv_weight: float = 2.0  # kv-cache-utilization-scorer
    overlap_weight: float = 1.0  # Dynamo --kv-overlap-score-weight
    temperature: float = 0.0  # Dynamo --router-temperature


class RouterIndex:
    """What a router recorded of the blocks it sent to each replica: per replica an LRU of keys, and per key
    the replicas holding it (a bit mask), so one walk down a prompt matches every replica at once."""

    def __init__(self, replicas: int) -> None:
        self.lru: list[OrderedDict[int, None]] = [OrderedDict() for _ in range(replicas)]
        self.owners: dict[int, int] = {}

    def matches(self, keys: tuple[int, ...], limit: int) -> list[int]:
        """Per replica, how many of the first `limit` keys it holds, counted from the start."""
        out = [0] * len(self.lru)
        live, owners, depth = (1 << len(self.lru)) - 1, self.owners, 0
        for key in keys[:limit]:
            held = live & owners.get(key, 0)
            if held != live:
                for r in range(len(out)):
                    if live >> r & 1 and not held >> r & 1:
                        out[r] = depth
                live = held
                if not live:
                    return out
            depth += 1
        for r in range(len(out)):
            if live >> r & 1:
                out[r] = depth
        return out

    def add(self, replica: int, keys: Sequence[int]) -> None:
        """Record `keys` at `replica`, each the most recently used in turn."""
        lru, bit, owners = self.lru[replica], 1 << replica, self.owners
        for key in keys:
            lru[key] = None
            lru.move_to_end(key)
            owners[key] = owners.get(key, 0) | bit

    def trim(self, replica: int, size: int) -> None:
        """Forget the least recently used keys of `replica` beyond `size`."""
        lru, keep, owners = self.lru[replica], ~(1 << replica), self.owners
        while len(lru) > size:
            key = lru.popitem(last=False)[0]
            left = owners[key] & keep
            if left:
                owners[key] = left
            else:
                del owners[key]


class Router:
    name = ""
    uses_load = False  # whether `pick` reads the replicas' load (they are advanced to `now` first)

    def __init__(self, replicas: int, settings: RouterSettings, block_size: int, seed: int) -> None:
        self.n, self.settings, self.block = replicas, settings, block_size
        self.rng = random.Random(seed)

    def pick(self, req: ClusterRequest, replicas: Sequence[Replica], now: float) -> int:
        raise NotImplementedError

    def sent(self, req: ClusterRequest, replica: int, now: float) -> None:
        """What the router records once it sent `req` to `replica`."""

    def _best(self, scores: Sequence[float], lowest: bool = False) -> int:
        target = min(scores) if lowest else max(scores)
        ties = [i for i, s in enumerate(scores) if s == target]
        return ties[0] if len(ties) == 1 else self.rng.choice(ties)


class RoundRobin(Router):
    name = "round-robin"

    def __init__(self, *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.next = 0

    def pick(self, req: ClusterRequest, replicas: Sequence[Replica], now: float) -> int:
        self.next = (self.next + 1) % self.n
        return (self.next - 1) % self.n


class LeastLoaded(Router):
    name, uses_load = "least-loaded", True

    def pick(self, req: ClusterRequest, replicas: Sequence[Replica], now: float) -> int:
        return self._best([r.in_flight for r in replicas], lowest=True)


class Session(Router):
    name = "session"

    def pick(self, req: ClusterRequest, replicas: Sequence[Replica], now: float) -> int:
        digest = hashlib.blake2b(req.session.encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big") % self.n


class PrefixAware(Router):
    name, uses_load = "prefix-aware", True

    def __init__(self, *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.trees = RouterIndex(self.n)
        self.tree_blocks = max(1, self.settings.max_tree_size // (CHARS_PER_TOKEN * self.block))
        self.next_trim = self.settings.eviction_interval_s

    def pick(self, req: ClusterRequest, replicas: Sequence[Replica], now: float) -> int:
        s = self.settings
        if now >= self.next_trim:
            for r in range(self.n):
                self.trees.trim(r, self.tree_blocks)
            self.next_trim = now + s.eviction_interval_s
        loads = [r.in_flight for r in replicas]
        if (
            max(loads) - min(loads) > s.balance_abs_threshold
            and max(loads) > min(loads) * s.balance_rel_threshold
        ):
            return self._best(loads, lowest=True)
        blocks = req.prompt_blocks
        matched = self.trees.matches(req.nodes, blocks)
        if blocks and max(matched) / blocks > s.cache_threshold:
            return self._best(matched)
        return self._best([len(t) for t in self.trees.lru], lowest=True)

    def sent(self, req: ClusterRequest, replica: int, now: float) -> None:
        # a prefix is touched after what extends it: a tree evicts leaves first
        self.trees.add(replica, req.nodes[req.prompt_blocks - 1 :: -1] if req.prompt_blocks else ())


class ApproxPrefix(Router):
    name, uses_load = "approx-prefix", True

    def __init__(self, *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.index = RouterIndex(self.n)

    def pick(self, req: ClusterRequest, replicas: Sequence[Replica], now: float) -> int:
        s, keys = self.settings, req.router_keys
        prefix = [m / len(keys) for m in self.index.matches(keys, len(keys))] if keys else [0.0] * self.n
        waiting = [r.waiting for r in replicas]
        lo, hi = min(waiting), max(waiting)
        queue = [(hi - w) / (hi - lo) if hi > lo else 1.0 for w in waiting]
        kv = [1.0 - min(1.0, r.active_blocks / r.pool.capacity) for r in replicas]
        scores = [
            s.prefix_weight * p + s.queue_weight * q + s.kv_weight * k
            for p, q, k in zip(prefix, queue, kv, strict=True)
        ]
        return self._best(scores)

    def sent(self, req: ClusterRequest, replica: int, now: float) -> None:
        self.index.add(replica, req.router_keys)  # in order, as llm-d's indexer adds them
        self.index.trim(replica, self.settings.lru_capacity)


class KvCost(Router):
    name, uses_load = "kv-cost", True

    def pick(self, req: ClusterRequest, replicas: Sequence[Replica], now: float) -> int:
        s, bs = self.settings, self.block
        blocks = -(-req.prompt_tokens // bs)
        costs = []
        for r in replicas:
            new = req.prompt_tokens - r.overlap(req) * bs
            prefill = (new + r.prefill_tokens) / bs
            decode = r.active_blocks + blocks
            costs.append(s.overlap_weight * prefill + decode)
        if s.temperature <= 0:
            return self._best(costs, lowest=True)
        lo, hi = min(costs), max(costs)
        scaled = [(c - lo) / (hi - lo) if hi > lo else 0.0 for c in costs]
        weights = [math.exp(-x / s.temperature) for x in scaled]
        return self.rng.choices(range(self.n), weights)[0]


ROUTERS: dict[str, type[Router]] = {
    r.name: r for r in (RoundRobin, LeastLoaded, Session, PrefixAware, ApproxPrefix, KvCost)
}
