"""One simulated run: a workload through a router over N replicas, request by request in arrival order,
each served by its replica's cache and clock (`engine.cluster.replica`), and what the run amounts to.

`load` scales the trace's own rate: arrival times are divided by it (2: the same requests in half the time).
The cache outcome depends on the order of arrivals and the routing only, so a router that reads no load
(round-robin, session) gets the same hit rate at every load; the others route by the load they see.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.cluster.costs import CostModel
from engine.cluster.pools import POOLS, CpuTier
from engine.cluster.replica import Replica, Served
from engine.cluster.routers import ROUTERS, RouterSettings
from engine.cluster.workload import Workload
from engine.errors import InvalidArgumentError

MAX_TIME_S = 1e12  # a float's step there is 0.12 ms


@dataclass(frozen=True)
class ClusterConfig:
    pool_blocks: int  # per replica
    eviction: str = "lru"
    tier_blocks: int = 0  # per replica; 0: no CPU tier
    settings: RouterSettings = field(default_factory=RouterSettings)
    seed: int = 0


@dataclass
class RunResult:
    layout: str
    router: str
    replicas: int
    load: float
    served: list[Served]
    per_replica: list[dict[str, int]]
    tier_evictions: int

    def summary(self, workload: Workload) -> dict[str, Any]:
        """The run's row of the `runs` list: hit rate, load per replica, TTFT percentiles, throughput."""
        reqs = workload.requests
        prompt = sum(r.prompt_tokens for r in reqs)
        output = sum(r.output_tokens for r in reqs)
        cached = sum(s.cached_tokens for s in self.served)
        ttft = np.array([s.ttft_s for s in self.served])
        queue = np.array([s.queue_s for s in self.served])
        first = min(r.time_s for r in reqs) / self.load
        span = max(max(s.end_s for s in self.served) - first, 1e-9)
        offered = (max(r.time_s for r in reqs) / self.load - first) or span
        loads = [p["prompt_tokens"] for p in self.per_replica]
        computed = [p["computed_tokens"] for p in self.per_replica]
        mean_load, mean_computed = np.mean(loads), np.mean(computed)
        return {
            "layout": workload.layout,
            "router": self.router,
            "replicas": self.replicas,
            "load": self.load,
            "rate_rps": len(reqs) / offered,
            "requests": len(reqs),
            "prompt_tokens": prompt,
            "cached_tokens": cached,
            "hit_rate": cached / prompt if prompt else 0.0,
            "tier_hit_rate": sum(s.tier_tokens for s in self.served) / prompt if prompt else 0.0,
            "evictions": sum(s.evictions for s in self.served),
            "tier_evictions": self.tier_evictions,
            "load_max_over_mean": float(max(loads) / mean_load) if mean_load else 0.0,
            "computed_max_over_mean": float(max(computed) / mean_computed) if mean_computed else 0.0,
            "ttft_p50_s": float(np.percentile(ttft, 50)),
            "ttft_p90_s": float(np.percentile(ttft, 90)),
            "ttft_p99_s": float(np.percentile(ttft, 99)),
            "ttft_mean_s": float(ttft.mean()),
            "queue_p99_s": float(np.percentile(queue, 99)),
            "makespan_s": span,
            "throughput_rps": len(reqs) / span,
            "prompt_tokens_per_s": prompt / span,
            "output_tokens_per_s": output / span,
            "per_replica": self.per_replica,
        }


def check_load(workload: Workload, load: float) -> None:
    """`load` when the arrival times divided by it stay where the simulated clock resolves a millisecond
    (1e-308 sent them to infinity: NaN columns); else one line naming --load."""
    latest = max(abs(r.time_s) for r in workload.requests) / load if load > 0 else math.inf
    if not (math.isfinite(load) and load > 0 and latest <= MAX_TIME_S):
        raise InvalidArgumentError(
            f"--load {load:g}: the trace's arrival times divided by it reach {latest:.3g} s, over the "
            f"{MAX_TIME_S:.0e} s within which the simulated clock resolves a millisecond: give a larger --load"
        )


def simulate(
    workload: Workload, router: str, replicas: int, config: ClusterConfig, cost: CostModel, load: float = 1.0
) -> RunResult:
    if router not in ROUTERS:
        raise InvalidArgumentError(f"unknown router {router!r}; choose from {', '.join(ROUTERS)}")
    if workload.most_blocks > config.pool_blocks:
        raise InvalidArgumentError(
            f"a request of {workload.name} holds {workload.most_blocks} blocks of {workload.block_size} "
            f"tokens at once; each replica's pool holds {config.pool_blocks}: give --pool-tokens at least "
            f"{workload.most_blocks * workload.block_size:,}"
        )
    check_load(workload, load)
    pool = POOLS[config.eviction]
    reps = [
        Replica(
            i,
            pool(config.pool_blocks),
            CpuTier(config.tier_blocks) if config.tier_blocks else None,
            cost,
            workload.block_size,
        )
        for i in range(replicas)
    ]
    chooser = ROUTERS[router](replicas, config.settings, workload.block_size, config.seed)
    advance = chooser.uses_load
    served = []
    for req in workload.requests:
        now = req.time_s / load
        if advance:
            for r in reps:
                r.advance(now)
        k = chooser.pick(req, reps, now)
        served.append(reps[k].serve(req, now))
        chooser.sent(req, k, now)
    per_replica = [
        {"requests": r.requests, "prompt_tokens": r.prompt_tokens, "computed_tokens": r.computed_tokens}
        for r in reps
    ]
    tier = sum(r.tier.evictions for r in reps if r.tier is not None)
    return RunResult(workload.layout, router, replicas, load, served, per_replica, tier)
