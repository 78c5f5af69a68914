"""What the block size does to reuse: a prompt pair that diverges mid-prompt, served by engines with
different block sizes (only whole blocks before the first differing token are reused)."""

from __future__ import annotations

import itertools

from benchmarks.harness import Pair, Shapes, measure
from engine.runtime.engine import Engine


def test_block_size_reuse(benchmark, pair: Pair, shapes: Shapes, block_size: int) -> None:
    length, diverge = shapes.diverging
    ours = pair.ours
    engine = Engine(
        ours.source, ours.model, None, ours.device, ours.dtype, block_size=block_size, cache_tokens=8 * length
    )
    first = pair.base[:length]
    engine.generate(first, max_new_tokens=1)  # publishes the first prompt's blocks
    runs, prompt, seeds = [], [], itertools.count(1000)

    def next_prompt() -> None:  # the same head, then a tail never seen before
        prompt[:] = first[:diverge] + pair.tokens(length - diverge, next(seeds))

    expected = diverge // block_size * block_size
    benchmark.group = f"block size ({length} tokens, diverging at {diverge}) {pair.device.type}"
    measure(
        benchmark,
        pair,
        lambda: runs.append(engine.generate(prompt, max_new_tokens=1)),
        shapes.budget_s,
        setup=next_prompt,
        case="block_size",
        impl="ours",
        block_size=block_size,
        tokens=length,
        diverge_at=diverge,
        cached_tokens=expected,
    )
    assert {g.usage.cached_tokens for g in runs} == {expected}
