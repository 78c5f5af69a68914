"""`/metrics` under vLLM's names: the Metrics object driven as the server drives it (in process), and a real
SmolLM2 server's page after a request, each vLLM-named series equal to its kvtestbed twin."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from engine.serve.metrics import Metrics
from tests.serve.clients import GREEDY, MODEL, openai_client
from tests.serve.conftest import Server

VLLM_NAMES = {
    "vllm:prefix_cache_queries",
    "vllm:prefix_cache_hits",
    "vllm:prompt_tokens",
    "vllm:generation_tokens",
    "vllm:time_to_first_token_seconds",
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
}


def samples(text: str) -> dict[tuple[str, tuple], float]:
    """Every sample of a /metrics page: (name, sorted labels) -> value."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def vllm(values: dict[tuple[str, tuple], float], name: str, model: str) -> float:
    return values[(name, (("engine", "0"), ("model_name", model)))]


def stats(hit: int, miss: int, in_use: int) -> dict[str, int]:
    return {
        "hit_tokens": hit,
        "miss_tokens": miss,
        "evictions": 0,
        "preemptions": 0,
        "blocks_total": 8,
        "blocks_in_use": in_use,
        "blocks_cached": 0,
        "blocks_free": 8 - in_use,
    }


def test_vllm_names_follow_the_server_s_own() -> None:
    m = Metrics("my-model")
    m.cache(stats(0, 0, 0))
    m.waiting_now(3)
    m.started(0.01)
    m.cache(stats(32, 8, 2))
    m.first_token(0.3, prompt_tokens=40, generation_tokens=5)
    values = samples(m.text().decode())
    v = lambda name: vllm(values, name, "my-model")  # noqa: E731
    assert v("vllm:prefix_cache_queries_total") == 40 and v("vllm:prefix_cache_hits_total") == 32
    assert v("vllm:prompt_tokens_total") == 40 and v("vllm:generation_tokens_total") == 5
    assert v("vllm:num_requests_running") == 1 and v("vllm:num_requests_waiting") == 3
    assert v("vllm:kv_cache_usage_perc") == 0.25
    assert (
        v("vllm:time_to_first_token_seconds_count") == 1 and v("vllm:time_to_first_token_seconds_sum") == 0.3
    )
    m.ended("openai", "finished")
    assert vllm(samples(m.text().decode()), "vllm:num_requests_running", "my-model") == 0


def test_a_real_server_exports_vllm_names(smollm2_server: Server) -> None:
    openai_client(smollm2_server).chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Name a colour."}], max_tokens=3, **GREEDY
    )
    text = smollm2_server.metrics()
    names = {f.name for f in text_string_to_metric_families(text)}
    assert {n.removesuffix("_total") for n in names} >= VLLM_NAMES
    values = samples(text)
    v = lambda name: vllm(values, name, MODEL)  # noqa: E731
    assert v("vllm:prefix_cache_queries_total") == values[("kvtestbed_prefix_cache_queries_total", ())] > 0
    assert v("vllm:prefix_cache_hits_total") == values[("kvtestbed_prefix_cache_hits_total", ())]
    ttft = values[("kvtestbed_time_to_first_token_seconds_count", ())]
    assert v("vllm:time_to_first_token_seconds_count") == ttft >= 1
    assert v("vllm:prompt_tokens_total") > 0 and 0 <= v("vllm:kv_cache_usage_perc") <= 1
