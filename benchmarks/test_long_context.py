"""Long agent contexts, the 32k-128k prompts coding agents send, on one engine of `--long-model` (default
synthetic:qwen2.5-0.5b-128k: Qwen2.5-0.5B's shape with Qwen's YaRN, a 131,072-token context): a cold prefill
of every `long` length (`--shapes long`: 8k / 16k / 32k), and at the longest, warm (all of the prompt but the
last `long_new` = 1,024 tokens cached) against cold, alternating round by round.

Ours only: `transformers` has no prefix cache to compare the warm case with. Chunked prefill (4,096 tokens a
forward) keeps the activations at one chunk's size; the KV window holds the whole prompt. Every record keeps the
process's peak resident memory during the case (`peak_rss_bytes`: Linux VmHWM, reset before the case's first
call, `peak_rss_scope` says so) and the KV pool's size.
"""

from __future__ import annotations

import itertools

from benchmarks.harness import Shapes, Solo, measure, measure_alternating
from benchmarks.peak_rss import peak_rss_bytes, reset_peak_rss
from engine.inspect.flops import forward_flops

LONG_PAIRS = 3  # warm/cold rounds at the longest length: a 32k cold prefill takes minutes on a CPU


def memory_info(solo: Solo, scope: str) -> dict[str, object]:
    return {"peak_rss_bytes": peak_rss_bytes(), "peak_rss_scope": scope, "kv_pool_bytes": solo.ours.kv.nbytes}


def test_long_prefill(benchmark, solo: Solo, shapes: Shapes, long: int) -> None:
    ids = solo.tokens(long, seed=1)
    benchmark.group = f"long prefill {long} {solo.device.type}"
    scope = reset_peak_rss()
    measure(
        benchmark,
        solo,
        lambda: solo.ours.generate(ids, max_new_tokens=1, cache=False),
        shapes.budget_s,
        case="long_prefill",
        impl="ours",
        tokens=long,
        flops=forward_flops(solo.config, 0, long),
    )
    benchmark.extra_info |= memory_info(solo, scope)


def test_long_warm_vs_cold(benchmark, solo: Solo, shapes: Shapes, longest: int) -> None:
    """At the longest length L: L - long_new tokens cached (a new suffix each round, so that only the prefix is
    served from cache) against the cold prefill of a prompt of L; the ratio is warm / cold."""
    n, new = longest, shapes.long_new
    prefix = solo.tokens(n - new, seed=2)
    solo.ours.generate(prefix, max_new_tokens=1)  # untimed: publishes the prefix's blocks
    cold_ids, warm_ids, seeds, runs = solo.tokens(n, seed=3), [], itertools.count(10**6), []

    def next_prompt() -> None:
        warm_ids[:] = prefix + solo.tokens(new, next(seeds))

    sides = {
        "warm": lambda: runs.append(solo.ours.generate(warm_ids, max_new_tokens=1)),
        "cold": lambda: solo.ours.generate(cold_ids, max_new_tokens=1, cache=False),
    }
    benchmark.group = f"long warm/cold {n} {solo.device.type}"
    scope = reset_peak_rss()
    measure_alternating(
        benchmark,
        solo,
        sides,
        shapes.budget_s,
        LONG_PAIRS,
        setup=next_prompt,
        case="long_warm_cold",
        tokens=n,
        cached=n - new,
        new=new,
        flops=forward_flops(solo.config, n - new, n),
    )
    benchmark.extra_info |= memory_info(solo, scope)
    assert {g.usage.cached_tokens for g in runs} == {n - new}
