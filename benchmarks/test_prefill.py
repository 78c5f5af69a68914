"""Cold prefill of n tokens (no prefix cache): token ids in, first token out; ours and `transformers` timed
apart, and alternating call by call."""

from __future__ import annotations

from benchmarks.harness import Pair, Shapes, measure, measure_alternating
from engine.inspect.flops import forward_flops

ALTERNATING_ROUNDS = 7  # at least this many pairs: the ratio's spread is reported


def test_prefill(benchmark, pair: Pair, shapes: Shapes, impl: str, length: int) -> None:
    ids = pair.tokens(length, seed=1)
    if impl == "ours":
        fn = lambda: pair.ours.generate(ids, max_new_tokens=1, cache=False).token_ids[0]  # noqa: E731
    else:
        fn = lambda: pair.theirs_forward(ids)  # noqa: E731
    benchmark.group = f"prefill {length} {pair.device.type}"
    measure(
        benchmark,
        pair,
        fn,
        shapes.budget_s,
        case="prefill",
        impl=impl,
        tokens=length,
        flops=forward_flops(pair.config, 0, length),
    )


def test_prefill_alternating(benchmark, pair: Pair, shapes: Shapes, cold: int) -> None:
    """One round: our prefill and theirs back to back, which goes first alternating, so that a neighbour's
    burst on a shared machine meets both. The record keeps the median of the per-round ratios ours/theirs
    and their min-max (`ratio`, `ratio_min`, `ratio_max`, `pairs`); the timed round is both calls."""
    ids = pair.tokens(cold, seed=1)
    sides = {
        "ours": lambda: pair.ours.generate(ids, max_new_tokens=1, cache=False),
        "transformers": lambda: pair.theirs_forward(ids),
    }
    benchmark.group = f"prefill alternating {cold} {pair.device.type}"
    measure_alternating(
        benchmark, pair, sides, shapes.budget_s, ALTERNATING_ROUNDS, case="prefill_alternating", tokens=cold
    )
