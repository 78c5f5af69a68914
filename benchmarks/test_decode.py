"""One decode step with `context` tokens cached: the K/V of one new token written, every cached key read."""

from __future__ import annotations

from benchmarks.harness import Pair, Shapes, measure, rewind
from engine.flops import forward_flops
from engine.sequence import Sequence


def test_decode_step(benchmark, pair: Pair, shapes: Shapes, impl: str, context: int) -> None:
    ids = pair.base[: context + 1]
    benchmark.group = f"decode @{context} {pair.device.type}"
    info = dict(
        case="decode", impl=impl, context=context, flops=forward_flops(pair.config, context, context + 1)
    )
    if impl == "transformers":
        cache = pair.their_cache(context)
        measure(benchmark, pair, lambda: pair.theirs_forward(ids[-1:], cache), shapes.budget_s,
                setup=lambda: rewind(cache, context), **info)  # fmt: skip
        return
    # Our engine's own decode step (`Engine._forward` of one position) on a sequence whose first `context`
    # tokens are served from the prefix cache; every round rewrites the same position.
    seq = Sequence(ids)
    pair.ours.blocks.admit(seq, context + 1)
    assert seq.num_cached == context
    try:
        step = lambda: int(pair.ours._forward(seq, context, context + 1).argmax())  # noqa: E731
        measure(benchmark, pair, step, shapes.budget_s, **info)
    finally:
        pair.ours.blocks.release(seq)
