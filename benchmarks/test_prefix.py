"""Prefill with a cached prefix: S tokens served from cache, V new ones computed (TTFT), and the block
hashing and lookup that find the S tokens; and the warm TTFT at long S against the same new tokens' forward
over a prefilled contiguous cache (transformers' DynamicCache and its StaticCache), interleaved, with the memory
the warm request adds as a share of the cached prefix's K/V."""

from __future__ import annotations

import itertools
import statistics
from functools import partial

from benchmarks.harness import WARM_NEW, Pair, Shapes, measure, measure_alternating, memory_added, rewind
from engine.inspect.flops import forward_flops, ideal_cached_ratio
from engine.kv.pool import KVCache

WARM_ROUNDS = 6  # at least one round in each order of the three sides


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


def test_warm_against_contiguous(benchmark, pair: Pair, shapes: Shapes, warm_peer: int) -> None:
    """Our warm TTFT (S cached in the pool, WARM_NEW new tokens, `generate` end to end) against transformers'
    forward of the same new tokens over a contiguous cache of the same S tokens, a DynamicCache and a
    StaticCache, the three interleaved round by round in every order (the caches rewound and the next prompt
    drawn untimed); first, untimed, the three must give the same logits. Then one more warm request's added
    memory: the pool read in place adds about one layer's gather, where a private window would add the whole
    prefix."""
    s = warm_peer
    prefix, seeds = pair.base[:s], itertools.count(7 * 10**6)
    caches = {"DynamicCache": pair.their_cache(s), "StaticCache": pair.their_cache(s, room=WARM_NEW)}
    suffix: list[int] = []
    runs: list = []

    def setup() -> None:
        for cache in caches.values():
            rewind(cache, s)
        suffix[:] = pair.tokens(WARM_NEW, next(seeds))

    setup()
    ours = pair.ours.generate(prefix + suffix, max_new_tokens=1, return_logits=True).logits[0]
    for name, cache in caches.items():
        pair.check_same_logits(ours, pair.theirs_logits(suffix, cache), f"warm {s}+{WARM_NEW}, {name}")
    sides = {
        "ours": lambda: runs.append(pair.ours.generate(prefix + suffix, max_new_tokens=1)),
        **{name: partial(pair.theirs_forward, suffix, cache) for name, cache in caches.items()},
    }
    benchmark.group = f"warm {s}+{WARM_NEW} {pair.device.type}"
    info = dict(case="warm_contiguous", cached=s, new=WARM_NEW)
    measure_alternating(benchmark, pair, sides, shapes.budget_s, WARM_ROUNDS, setup=setup, **info)
    assert {g.usage.cached_tokens for g in runs} == {s}
    setup()
    added = memory_added(pair.device, sides["ours"])
    prefix_bytes = s * KVCache.bytes_per_token(pair.config, pair.ours.dtype)
    benchmark.extra_info.update(
        added_bytes=added, prefix_kv_bytes=prefix_bytes, memory_share=added / prefix_bytes
    )


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
