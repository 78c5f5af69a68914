"""`GET /metrics`: Prometheus text from `prometheus_client`, on a registry of the server's own.

Prefix-cache queries and hits count prompt tokens (as vLLM's do), from the engine's cache statistics after
every request, as are the engine scheduler's preemptions; time to first token is measured from the moment
a request is queued (queue, template, tokenizer, lookup, prefill, first sample).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0)
OUTCOMES = ("finished", "failed", "aborted", "rejected")


class Metrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.queries = Counter(
            "kvtestbed_prefix_cache_queries", "Prompt tokens looked up in the prefix cache", registry=r
        )
        self.hits = Counter(
            "kvtestbed_prefix_cache_hits", "Prompt tokens served from the prefix cache", registry=r
        )
        self.evictions = Counter(
            "kvtestbed_prefix_cache_evictions", "Cached blocks evicted to make room", registry=r
        )
        self.preemptions = Counter("kvtestbed_preemptions", "Running requests preempted", registry=r)
        self.requests = Counter(
            "kvtestbed_requests", "Requests by API and outcome", ["api", "outcome"], registry=r
        )
        self.ttft = Histogram(
            "kvtestbed_time_to_first_token_seconds", "Queued to first token", buckets=SECONDS, registry=r
        )
        self.queue = Histogram(
            "kvtestbed_queue_time_seconds",
            "Queued to the engine, and there to a step with room for it",
            buckets=SECONDS,
            registry=r,
        )
        self.running = Gauge("kvtestbed_requests_running", "Requests the engine holds", registry=r)
        self.waiting = Gauge("kvtestbed_requests_waiting", "Requests not admitted to a step yet", registry=r)
        self.blocks = Gauge("kvtestbed_kv_blocks", "KV pool blocks by state", ["state"], registry=r)
        self._seen = {"hit_tokens": 0, "miss_tokens": 0, "evictions": 0, "preemptions": 0}

    def cache(self, stats: dict[str, int]) -> None:
        """The engine's cache statistics (`Engine.cache_stats()`, read on the engine thread)."""
        delta = {k: stats[k] - v for k, v in self._seen.items()}
        self._seen = {k: stats[k] for k in self._seen}
        self.queries.inc(delta["hit_tokens"] + delta["miss_tokens"])
        self.hits.inc(delta["hit_tokens"])
        self.evictions.inc(delta["evictions"])
        self.preemptions.inc(delta["preemptions"])
        for state, key in (("used", "blocks_in_use"), ("cached", "blocks_cached"), ("free", "blocks_free")):
            self.blocks.labels(state).set(stats[key])

    def started(self, queue_s: float) -> None:
        self.queue.observe(queue_s)
        self.running.inc()

    def first_token(self, seconds: float) -> None:
        self.ttft.observe(seconds)

    def finished(self, api: str, outcome: str, stats: dict[str, int]) -> None:
        """A request is done: the pool first, so that whoever sees it counted sees the pool after it."""
        self.cache(stats)
        self.ended(api, outcome)

    def ended(self, api: str, outcome: str) -> None:
        """A request the engine held is done (its pool already counted)."""
        self.running.dec()
        self.counted(api, outcome)

    def counted(self, api: str, outcome: str) -> None:
        """A request's outcome; alone for one that never reached the engine (refused, rejected)."""
        self.requests.labels(api, outcome).inc()

    def text(self) -> bytes:
        return generate_latest(self.registry)
