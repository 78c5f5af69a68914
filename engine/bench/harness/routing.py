"""`bench replay TRACE --endpoint URL1 --endpoint URL2 ... --router R`: each request goes to the replica that
a routing policy of engine/cluster/routers.py picks at the moment it is sent, from what a router in front of
real servers knows of them:
- load: the requests it sent to each and that are not answered yet (`in_flight`; a router that reads no
  server metrics cannot tell waiting from running, so `waiting` is the same count), the blocks they hold
  (prompt plus --max-tokens) and their prompt tokens not cached there (`prefill_tokens`);
- cache: the prompts it sent to each, on the simulator's node ids, in a pool of the predicted cache's size
  with the engine's LRU (`engine.cluster.pools.LruPool`): what KV events report once a prefill is done.
  Replies are not in it: each server caches the reply it generated, which the trace's next request (it
  carries the trace's recorded reply) matches only as far as the two agree.
The routers' own records (SGLang's tree, llm-d's index) are theirs, as in `bench cluster`; times are seconds
since the run started. Placement is recorded per request; what each server should have served is then
predicted by one `Predictor` per endpoint (engine/bench/harness/prediction.py), fed the requests placed
there in the order they were sent.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from engine.cluster.pools import LruPool
from engine.cluster.routers import ROUTERS, RouterSettings
from engine.cluster.workload import ClusterRequest, TokenPrompt, token_workload
from engine.errors import InvalidArgumentError
from engine.traces.rendering import TraceRenderer
from engine.traces.request import TraceRequest


class LiveReplica:
    """One server as the router sees it (the attributes the routers read of a simulated `Replica`)."""

    def __init__(self, capacity_blocks: int, block_size: int) -> None:
        self.pool, self.block = LruPool(capacity_blocks), block_size
        self.in_flight = self.active_blocks = self.prefill_tokens = 0

    @property
    def waiting(self) -> int:
        return self.in_flight

    def overlap(self, req: ClusterRequest) -> int:
        return self.pool.match(req.nodes, req.passes[0].limit)

    def sent(self, req: ClusterRequest, blocks: int) -> int:
        """Count the request in flight here; its uncached prompt tokens (then its prompt is cached)."""
        new = req.prompt_tokens - self.overlap(req) * self.block
        self.in_flight += 1
        self.active_blocks += blocks
        self.prefill_tokens += new
        self.pool.serve(req.nodes, req.passes[0])
        return new

    def answered(self, blocks: int, new: int) -> None:
        self.in_flight -= 1
        self.active_blocks -= blocks
        self.prefill_tokens -= new


class LiveRouter:
    """Picks a replica per request as it is sent (thread-safe: sessions send at once)."""

    def __init__(
        self,
        name: str,
        requests: Sequence[TraceRequest],
        renderer: TraceRenderer,
        replicas: int,
        capacity_blocks: int,
        block_size: int,
        max_tokens: int,
        seed: int,
    ) -> None:
        prompts = []
        for r in requests:
            prompt = renderer.prompt(r)
            prompts.append(TokenPrompt(0.0, r.session, prompt.ids, [], prompt.text, max_tokens))
        workload = token_workload("routed", prompts, block_size)
        if workload.requests and workload.most_blocks > capacity_blocks:
            raise InvalidArgumentError(
                f"a prompt of this trace fills {workload.most_blocks * block_size:,} tokens of cache; the "
                f"predicted cache holds {capacity_blocks * block_size:,}: give --cache-tokens at least that"
            )
        self.requests = workload.requests
        self.router = ROUTERS[name](replicas, RouterSettings(), block_size, seed)
        self.replicas = [LiveReplica(capacity_blocks, block_size) for _ in range(replicas)]
        self.block, self.max_tokens = block_size, max_tokens
        self.placement: dict[int, int] = {}
        self.held: dict[int, tuple[int, int]] = {}  # request index -> (blocks, new tokens) while in flight
        self.lock, self.start = threading.Lock(), time.perf_counter()

    def pick(self, i: int) -> int:
        """The replica request `i` goes to, now; it counts as in flight there until `answered(i)`."""
        req = self.requests[i]
        with self.lock:
            now = time.perf_counter() - self.start
            k = self.router.pick(req, self.replicas, now)
            blocks = -(-(req.prompt_tokens + self.max_tokens) // self.block)
            self.held[i] = (blocks, self.replicas[k].sent(req, blocks))
            self.router.sent(req, k, now)
            self.placement[i] = k
        return k

    def answered(self, i: int) -> None:
        with self.lock:
            self.replicas[self.placement[i]].answered(*self.held.pop(i))
