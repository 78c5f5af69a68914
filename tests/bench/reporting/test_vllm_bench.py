"""`vllm bench serve`-shaped results: vLLM's keys and its arithmetic (means, medians, p99 in ms; TPOT over the
tokens after the first; throughputs over the duration) on hand-made requests; a failure counted as failed
with null times; what was not measured null, never 0."""

from __future__ import annotations

import pytest

from engine.bench.reporting.vllm_bench import ServedRequest, vllm_bench_result

VLLM_KEYS = {
    "duration",
    "completed",
    "failed",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "request_goodput",
    "output_throughput",
    "total_token_throughput",
    "input_lens",
    "output_lens",
    "ttfts",
    "itls",
    "errors",
    *(f"{s}_{m}_ms" for s in ("mean", "median", "std", "p99") for m in ("ttft", "tpot", "itl", "e2el")),
}


def result(requests: list[ServedRequest]) -> dict:
    return vllm_bench_result(
        requests,
        2.0,
        backend="openai-chat",
        model_id="m",
        tokenizer_id="t",
        request_rate=None,
        max_concurrency=1,
    )


def test_vllm_keys_and_arithmetic() -> None:
    r = result(
        [
            ServedRequest(100, 5, 0.1, 0.5, [0.1, 0.1, 0.1, 0.1]),
            ServedRequest(200, 1, 0.3, 0.3, []),
            ServedRequest(50, None, None, None, [], error="HTTP 500"),
        ]
    )
    assert VLLM_KEYS <= set(r)
    assert (r["completed"], r["failed"], r["num_prompts"]) == (2, 1, 3)
    assert (r["total_input_tokens"], r["total_output_tokens"]) == (300, 6)
    assert (
        r["request_throughput"] == 1.0
        and r["output_throughput"] == 3.0
        and r["total_token_throughput"] == 153
    )
    assert r["mean_ttft_ms"] == pytest.approx(200) and r["median_ttft_ms"] == pytest.approx(200)
    assert r["p99_ttft_ms"] == pytest.approx(298)
    assert r["mean_tpot_ms"] == pytest.approx(100)  # (0.5 - 0.1) / 4; a one-token reply has none
    assert r["mean_itl_ms"] == pytest.approx(100) and r["mean_e2el_ms"] == pytest.approx(400)
    assert r["ttfts"] == [0.1, 0.3, None] and r["errors"] == ["", "", "HTTP 500"]
    assert r["request_rate"] == "inf" and r["max_concurrency"] == 1


def test_what_was_not_measured_is_null() -> None:
    r = result([ServedRequest(10, 3, 0.1, 0.4, None)])
    assert r["mean_itl_ms"] is None and r["p99_itl_ms"] is None and r["itls"] == [None]
    assert r["mean_tpot_ms"] == pytest.approx(150)
