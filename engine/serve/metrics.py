"""`GET /metrics`: Prometheus text from `prometheus_client`, on a registry of the server's own.

Prefix-cache queries and hits count prompt tokens (as vLLM's do), from the engine's cache statistics after
every request, as are the engine scheduler's preemptions; time to first token is measured from the moment
a request is queued (queue, template, tokenizer, lookup, prefill, first sample).

The same facts are also exported under vLLM's metric names and labels (`model_name`: the first served model
name; `engine`: "0"), so dashboards and routers built for vLLM read this server: `vllm:prefix_cache_queries`,
`vllm:prefix_cache_hits`, `vllm:prompt_tokens`, `vllm:generation_tokens` (counters; a request's tokens are
counted when it finishes), `vllm:time_to_first_token_seconds` (vLLM's buckets), `vllm:num_requests_running`,
`vllm:num_requests_waiting`, `vllm:kv_cache_usage_perc` (blocks held by requests / all blocks, 0 to 1).
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0)
OUTCOMES = ("finished", "failed", "aborted", "rejected")
VLLM_TTFT_SECONDS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
)
VLLM_TTFT_SECONDS += (20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
VLLM_LABELS = ("model_name", "engine")


class VllmMetrics:
    """The server's metrics under vLLM's names (vllm/v1/metrics/loggers.py), one label set."""

    def __init__(self, registry: CollectorRegistry, model_name: str) -> None:
        r, labels = registry, (model_name, "0")

        def counter(name: str, doc: str) -> Counter:
            return Counter(name, doc, VLLM_LABELS, registry=r).labels(*labels)

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, VLLM_LABELS, registry=r).labels(*labels)

        self.queries = counter(
            "vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens."
        )
        self.hits = counter(
            "vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens."
        )
        self.prompt_tokens = counter("vllm:prompt_tokens", "Number of prefill tokens processed.")
        self.generation_tokens = counter("vllm:generation_tokens", "Number of generation tokens processed.")
        self.ttft = Histogram(
            "vllm:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            VLLM_LABELS,
            buckets=VLLM_TTFT_SECONDS,
            registry=r,
        ).labels(*labels)
        self.running = gauge("vllm:num_requests_running", "Number of requests in model execution batches.")
        self.waiting = gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.")
        self.usage = gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.")


class Metrics:
    def __init__(self, model_name: str = "") -> None:
        r = self.registry = CollectorRegistry()
        self.vllm = VllmMetrics(r, model_name)
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
        for queries, hits in ((self.queries, self.hits), (self.vllm.queries, self.vllm.hits)):
            queries.inc(delta["hit_tokens"] + delta["miss_tokens"])
            hits.inc(delta["hit_tokens"])
        self.vllm.usage.set(stats["blocks_in_use"] / stats["blocks_total"])
        self.evictions.inc(delta["evictions"])
        self.preemptions.inc(delta["preemptions"])
        for state, key in (("used", "blocks_in_use"), ("cached", "blocks_cached"), ("free", "blocks_free")):
            self.blocks.labels(state).set(stats[key])

    def started(self, queue_s: float) -> None:
        self.queue.observe(queue_s)
        self.running.inc()
        self.vllm.running.inc()

    def waiting_now(self, requests: int) -> None:
        self.waiting.set(requests)
        self.vllm.waiting.set(requests)

    def first_token(self, seconds: float, prompt_tokens: int, generation_tokens: int) -> None:
        """A finished request's time to first token, and its token counts."""
        self.ttft.observe(seconds)
        self.vllm.ttft.observe(seconds)
        self.vllm.prompt_tokens.inc(prompt_tokens)
        self.vllm.generation_tokens.inc(generation_tokens)

    def finished(self, api: str, outcome: str, stats: dict[str, int]) -> None:
        """A request is done: the pool first, so that whoever sees it counted sees the pool after it."""
        self.cache(stats)
        self.ended(api, outcome)

    def ended(self, api: str, outcome: str) -> None:
        """A request the engine held is done (its pool already counted)."""
        self.running.dec()
        self.vllm.running.dec()
        self.counted(api, outcome)

    def counted(self, api: str, outcome: str) -> None:
        """A request's outcome; alone for one that never reached the engine (refused, rejected)."""
        self.requests.labels(api, outcome).inc()

    def recording(self, active: Callable[[], bool]) -> None:
        """With --record: `kvtestbed_recording` reads 1 while every answered request is recorded, 0 once
        a write failed and recording stopped (engine/serve/recorder.py)."""
        gauge = Gauge(
            "kvtestbed_recording", "1 while --record writes, 0 once it stopped", registry=self.registry
        )
        gauge.set_function(lambda: float(active()))

    def text(self) -> bytes:
        return generate_latest(self.registry)
