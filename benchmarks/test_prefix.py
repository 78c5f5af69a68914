"""Prefill with a cached prefix: S tokens served from cache, V new ones computed (TTFT), and the block
hashing and lookup that find the S tokens."""

from __future__ import annotations

import itertools
import statistics

from benchmarks.harness import Pair, Shapes, measure, rewind
from engine.inspect.flops import forward_flops, ideal_cached_ratio


def test_cached_prefill(
    benchmark, pair: Pair, shapes: Shapes, impl: str, cached_new: tuple[int, int]
) -> None:
    s, v = cached_new
    prefix = pair.base[:s]
    benchmark.group = f"cached {s}+{v} {pair.device.type}"
    info = dict(
        case="cached",
        impl=impl,
        cached=s,
        new=v,
        flops=forward_flops(pair.config, s, s + v),
        ideal_ratio=ideal_cached_ratio(pair.config, s, v),
    )
    if impl == "transformers":
        cache, suffix = pair.their_cache(s), pair.tokens(v, seed=2)
        measure(
            benchmark,
            pair,
            lambda: pair.theirs_forward(suffix, cache),
            shapes.budget_s,
            setup=lambda: rewind(cache, s),
            **info,
        )
        return
    # Each call brings new tokens after the prefix (its own blocks are published as it runs, so a repeat of
    # the same prompt would be served from cache). Seeds differ per V too: random suffixes from one seed
    # share their first tokens, which would be served from the blocks of the case with the shorter V.
    runs, prompt, seeds = [], [], itertools.count(v * 10**6)

    def next_prompt() -> None:
        prompt[:] = prefix + pair.tokens(v, next(seeds))

    fn = lambda: runs.append(pair.ours.generate(prompt, max_new_tokens=1))  # noqa: E731
    measure(benchmark, pair, fn, shapes.budget_s, setup=next_prompt, **info)
    assert {g.usage.cached_tokens for g in runs} == {s}
    benchmark.extra_info["lookup_s"] = statistics.median(g.timing.lookup_s for g in runs)


def test_lookup(benchmark, pair: Pair, shapes: Shapes, cached_new: tuple[int, int]) -> None:
    """Hash every full block of an (S + V)-token prompt and find it cached: the worst case, a full hit."""
    n = sum(cached_new)
    ids, blocks = pair.base[:n], pair.ours.blocks
    pair.ours.generate(ids, max_new_tokens=1)  # untimed: earlier cases may have evicted part of the base
    benchmark.group = f"lookup {n} {pair.device.type}"
    hit = measure(
        benchmark,
        pair,
        lambda: blocks.match(ids)[0],
        shapes.budget_s,
        case="lookup",
        impl="ours",
        tokens=n,
        block_size=blocks.block_size,
    )
    assert len(hit) == (n - 1) // blocks.block_size
