"""One replica: its prefix cache (pool and optional CPU tier) and its clock.

The clock, per request routed here at its arrival time t:
- prefills run one at a time, first come first served: the request waits `queue_s` for the prefills
  before it, then loads its CPU-tier blocks over the host link (`load_s`), then prefills its new tokens
  after its cached ones (`prefill_s`); TTFT = queue_s + load_s + prefill_s;
- it then decodes its other output tokens, each a step of the batch decoding on this replica when its
  decode starts (itself included, with its context): end = first token + (output - 1) x step.
Not in TTFT: the network, the router, rendering and tokenizing; decode steps sharing the device with a
prefill (each prefill runs as if alone) and several short prefills batched into one step (each pays the
fixed cost of a forward). Decode steps do not slow down for prefills that start during them.

The cache sees each request whole at its arrival, in arrival order (served, stored and released at once, as
`replay --analyze` serves it): in-flight requests do not pin their blocks, so a request's blocks are
cached for the next one even before its prefill would have finished.
"""

from __future__ import annotations

import heapq
from typing import NamedTuple

from engine.cluster.costs import CostModel
from engine.cluster.pools import CpuTier, LruPool, leading
from engine.cluster.workload import ClusterRequest


class Served(NamedTuple):
    replica: int
    cached_tokens: int  # served from the pool or the CPU tier
    tier_tokens: int  # of those, loaded from the CPU tier
    evictions: int  # pool blocks evicted while serving it
    queue_s: float
    load_s: float
    prefill_s: float
    end_s: float  # when its last token was decoded

    @property
    def ttft_s(self) -> float:
        return self.queue_s + self.load_s + self.prefill_s


class Replica:
    def __init__(
        self, index: int, pool: LruPool, tier: CpuTier | None, cost: CostModel, block_size: int
    ) -> None:
        self.index, self.pool, self.tier, self.cost, self.block = index, pool, tier, cost, block_size
        self.free_at = 0.0  # when the prefill before the next one ends
        self.decoding: list[tuple[float, int]] = []  # (end, context) of requests decoding
        self.context = 0  # their context tokens, summed
        # load as routers see it, advanced to the current arrival by `advance`
        self.flight: list[tuple[float, int]] = []  # (end, blocks) of requests routed here, unfinished
        self.waits: list[float] = []  # prefill starts still ahead
        self.prefilling: list[tuple[float, int]] = []  # (prefill end, new tokens) still ahead
        self.active_blocks = 0
        self.prefill_tokens = 0
        self.requests = self.prompt_tokens = self.computed_tokens = 0

    # ---- what routers read --------------------------------------------------------------------------
    def advance(self, now: float) -> None:
        """Forget what has finished by `now` (arrivals come in time order)."""
        while self.flight and self.flight[0][0] <= now:
            self.active_blocks -= heapq.heappop(self.flight)[1]
        while self.waits and self.waits[0] <= now:
            heapq.heappop(self.waits)
        while self.prefilling and self.prefilling[0][0] <= now:
            self.prefill_tokens -= heapq.heappop(self.prefilling)[1]

    @property
    def in_flight(self) -> int:
        return len(self.flight)

    @property
    def waiting(self) -> int:
        return len(self.waits)

    def overlap(self, req: ClusterRequest) -> int:
        """Blocks of the request's first pass this replica would serve (pool, then CPU tier): what KV
        events tell a router. Peeks: changes nothing."""
        limit = req.passes[0].limit
        m = self.pool.match(req.nodes, limit)
        if self.tier is not None and m < limit:
            m += leading(req.nodes[m:], self.tier.cached, limit - m)
        return m

    # ---- serving --------------------------------------------------------------------------------------
    def serve(self, req: ClusterRequest, now: float) -> Served:
        bs, before = self.block, self.pool.evictions
        cached = tier = 0
        for i, p in enumerate(req.passes):
            m, evicted = self.pool.serve(req.nodes, p)
            t = self.tier.match(req.nodes, m, p.limit) if self.tier is not None and m < p.limit else 0
            if self.tier is not None and evicted:
                self.tier.put(evicted)
            if i == 0:
                cached, tier = (m + t) * bs, t * bs
        new = req.prompt_tokens - cached
        start = max(now, self.free_at)
        load_s, prefill_s = self.cost.load(tier), self.cost.prefill(new, cached)
        first = start + load_s + prefill_s
        self.free_at = first
        decoding = self.decoding
        while decoding and decoding[0][0] <= first:
            self.context -= heapq.heappop(decoding)[1]
        end = first
        if req.output_tokens > 1:
            context = req.prompt_tokens + req.output_tokens // 2
            step = self.cost.decode_step(len(decoding) + 1, self.context + context)
            end = first + (req.output_tokens - 1) * step
            heapq.heappush(decoding, (end, context))
            self.context += context
        blocks = -(-(req.prompt_tokens + req.output_tokens) // bs)
        heapq.heappush(self.flight, (end, blocks))
        self.active_blocks += blocks
        heapq.heappush(self.waits, start)
        heapq.heappush(self.prefilling, (first, new))
        self.prefill_tokens += new
        self.requests += 1
        self.prompt_tokens += req.prompt_tokens
        self.computed_tokens += new
        evictions = self.pool.evictions - before
        return Served(self.index, cached, tier, evictions, start - now, load_s, prefill_s, end)
