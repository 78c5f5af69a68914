"""Many sequences at once. Decode: N requests that share a cached context each decode `BATCH_TOKENS` tokens
in one `generate_many` (the engine's step loop end to end: scheduling, batched forwards, sampling,
detokenizing); output tokens per second against one request is the batching gain. Prefill: four prompts in
one batch against the same four one after another (their ratio is the batched path's overhead)."""

from __future__ import annotations

from benchmarks.harness import Pair, Shapes, measure, measure_alternating

BATCH_TOKENS = 32  # decoded per request (EOS ignored): the step loop, not the prefill, dominates
ALTERNATING_ROUNDS = 5


def test_decode_batch(benchmark, pair: Pair, shapes: Shapes, batch: int) -> None:
    context = shapes.batch_context
    # distinct requests over one cached context: the last token differs, so each computes 1 prompt token
    prompts = [pair.base[:context] + [pair.base[context + i]] for i in range(batch)]

    def decode() -> list:
        return pair.ours.generate_many(prompts, max_new_tokens=BATCH_TOKENS, ignore_eos=True)

    benchmark.group = f"decode batch @{context} {pair.device.type}"
    measure(
        benchmark,
        pair,
        decode,
        shapes.budget_s,
        case="decode_batch",
        impl="ours",
        batch=batch,
        context=context,
        output_tokens=batch * BATCH_TOKENS,
    )


def test_prefill_batch(benchmark, pair: Pair, shapes: Shapes, length: int) -> None:
    prompts = [pair.tokens(length // 4, seed=10 + i) for i in range(4)]
    sides = {
        "batched": lambda: pair.ours.generate_many(prompts, max_new_tokens=1, cache=False),
        "one by one": lambda: [pair.ours.generate(p, max_new_tokens=1, cache=False) for p in prompts],
    }
    benchmark.group = f"prefill batch {length} {pair.device.type}"
    measure_alternating(
        benchmark, pair, sides, shapes.budget_s, ALTERNATING_ROUNDS, case="prefill_batch", tokens=length
    )
