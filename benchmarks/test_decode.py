"""One decode step with `context` tokens cached: the K/V of one new token written, every cached key read."""

from __future__ import annotations

from benchmarks.harness import Pair, Shapes, decode_request, measure, rewind
from engine.inspect.flops import forward_flops


def test_decode_step(benchmark, pair: Pair, shapes: Shapes, impl: str, context: int) -> None:
    if impl == "transformers":
        cache = pair.their_cache(context)
        step = lambda: pair.theirs_forward(pair.base[context : context + 1], cache)  # noqa: E731
        measure(
            benchmark,
            pair,
            step,
            shapes.budget_s,
            setup=lambda: rewind(cache, context),
            **_info(benchmark, pair, context, impl),
        )
        return
    _our_step(benchmark, pair, shapes, context, impl, windowed=True)


def test_decode_step_gathering(benchmark, pair: Pair, shapes: Shapes, context: int) -> None:
    """The same step gathering its context from the pool's blocks, as decoding does when device memory
    cannot hold the window: what the window saves, measured in the same run."""
    _our_step(benchmark, pair, shapes, context, "ours-gather", windowed=False)


def _info(benchmark, pair: Pair, context: int, impl: str) -> dict:
    """Groups the step with the others at this context; returns its JSON record."""
    benchmark.group = f"decode @{context} {pair.device.type}"
    return dict(
        case="decode", impl=impl, context=context, flops=forward_flops(pair.config, context, context + 1)
    )


def _our_step(benchmark, pair: Pair, shapes: Shapes, context: int, impl: str, windowed: bool) -> None:
    """Our engine's own decode step (`ModelRunner.run` of one position, reading its context from the
    decoding window as `generate` does, or gathering it) on a sequence whose first `context` tokens are
    served from the prefix cache; every round rewrites the same position."""
    with decode_request(pair.ours, pair.base[: context + 1], windowed) as req:
        step = lambda: pair.ours.runner.run([(req, 1)])[1].argmax().item()  # noqa: E731
        measure(
            benchmark,
            pair,
            step,
            shapes.budget_s,
            setup=lambda: setattr(req.seq, "num_kv", context),
            **_info(benchmark, pair, context, impl),
        )
