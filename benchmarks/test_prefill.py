"""Cold prefill of n tokens (no prefix cache): token ids in, first token out."""

from __future__ import annotations

from benchmarks.harness import Pair, Shapes, measure
from engine.flops import forward_flops


def test_prefill(benchmark, pair: Pair, shapes: Shapes, impl: str, length: int) -> None:
    ids = pair.tokens(length, seed=1)
    if impl == "ours":
        fn = lambda: pair.ours.generate(ids, max_new_tokens=1, cache=False).token_ids[0]  # noqa: E731
    else:
        fn = lambda: pair.theirs_forward(ids)  # noqa: E731
    benchmark.group = f"prefill {length} {pair.device.type}"
    measure(benchmark, pair, fn, shapes.budget_s, case="prefill", impl=impl, tokens=length,
            flops=forward_flops(pair.config, 0, length))  # fmt: skip
