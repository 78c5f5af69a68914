"""A run's requests as `vllm bench serve --save-result` writes them (vllm/benchmarks/serve.py), so tools that
read those files (vLLM's own comparison scripts, dashboards, sweeps) read this testbed's runs.

Keys: the run's `date`, `backend`, `model_id`, `tokenizer_id`, `num_prompts`, `request_rate` ("inf" for a
closed loop), `burstiness` (1.0: Poisson), `max_concurrency`; `duration` (s), `completed`, `failed`,
`total_input_tokens`, `total_output_tokens`, `request_throughput`, `request_goodput` (None: no goodput
targets), `output_throughput`, `total_token_throughput`; per request `input_lens`, `output_lens`, `ttfts`
(s), `itls` (s, a list per request), `latencies` (s), `errors`; and for ttft, tpot, itl and e2el
`mean_*_ms`, `median_*_ms`, `std_*_ms`, `p99_*_ms` over the completed requests, as vLLM computes them (TPOT:
(latency - TTFT) / (output tokens - 1) where more than one token came). What a run did not measure is null,
never 0: a failed request's times and counts, and ITL where the run records no per-token times (fleet).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

PERCENTILES = (99,)


@dataclass(frozen=True)
class ServedRequest:
    input_len: int | None
    output_len: int | None
    ttft_s: float | None
    latency_s: float | None
    itl_s: list[float] | None  # None: not measured
    error: str = ""


def _stats(name: str, values_s: Sequence[float] | None) -> dict[str, float | None]:
    keys = [
        f"mean_{name}_ms",
        f"median_{name}_ms",
        f"std_{name}_ms",
        *(f"p{p}_{name}_ms" for p in PERCENTILES),
    ]
    if values_s is None:
        return dict.fromkeys(keys)
    ms = np.array(values_s, dtype=float) * 1000 if len(values_s) else np.zeros(1)  # vLLM: 0 when empty
    values = [ms.mean(), np.median(ms), ms.std(), *(np.percentile(ms, p) for p in PERCENTILES)]
    return {k: float(v) for k, v in zip(keys, values, strict=True)}


def vllm_bench_result(
    requests: Sequence[ServedRequest],
    duration_s: float,
    *,
    backend: str,
    model_id: str,
    tokenizer_id: str,
    request_rate: float | None,
    max_concurrency: int | None,
) -> dict[str, Any]:
    done = [r for r in requests if not r.error and r.ttft_s is not None]
    total_in = sum(r.input_len or 0 for r in done)
    total_out = sum(r.output_len or 0 for r in done)
    tpots = [
        (r.latency_s - r.ttft_s) / (r.output_len - 1)
        for r in done
        if r.output_len and r.output_len > 1 and r.latency_s is not None and r.ttft_s is not None
    ]
    measured_itl = all(r.itl_s is not None for r in done)
    itls = [x for r in done for x in (r.itl_s or [])] if measured_itl else None
    duration = max(duration_s, 1e-9)
    return {
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M%S"),
        "backend": backend,
        "model_id": model_id,
        "tokenizer_id": tokenizer_id,
        "num_prompts": len(requests),
        "request_rate": "inf" if request_rate is None else request_rate,
        "burstiness": 1.0,
        "max_concurrency": max_concurrency,
        "duration": duration_s,
        "completed": len(done),
        "failed": len(requests) - len(done),
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "request_throughput": len(done) / duration,
        "request_goodput": None,
        "output_throughput": total_out / duration,
        "total_token_throughput": (total_in + total_out) / duration,
        "input_lens": [r.input_len for r in requests],
        "output_lens": [None if r.error else r.output_len for r in requests],
        "ttfts": [None if r.error else r.ttft_s for r in requests],
        "itls": [None if r.error else r.itl_s for r in requests],
        "latencies": [None if r.error else r.latency_s for r in requests],
        "errors": [r.error for r in requests],
        **_stats("ttft", [r.ttft_s for r in done]),  # type: ignore[misc]
        **_stats("tpot", tpots),
        **_stats("itl", itls),
        **_stats("e2el", [r.latency_s for r in done if r.latency_s is not None]),
    }
