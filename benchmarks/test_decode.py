"""One decode step with `context` tokens cached: the K/V of one new token written, every cached key read; a
batch of requests decoding together; and decode's fixed cost, the step against the weights it reads alone."""

from __future__ import annotations

import os
import statistics

from benchmarks.harness import (
    MAX_ROUNDS,
    SCATTERED_ROWS,
    Pair,
    Shapes,
    decode_request,
    measure,
    measure_alternating,
    rewind,
)
from benchmarks.weight_stream import weight_rows, weight_stream
from engine.bench.reporting.stats import verdict
from engine.inspect.flops import forward_flops

ALTERNATING_ROUNDS = 7
FIXED_COST = 0.15  # the decode step's target: at most this share of its weight stream on top of it


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
    _our_step(benchmark, pair, shapes, context, impl)


def _info(benchmark, pair: Pair, context: int, impl: str) -> dict:
    """Groups the step with the others at this context; returns its JSON record."""
    benchmark.group = f"decode @{context} {pair.device.type}"
    return dict(
        case="decode", impl=impl, context=context, flops=forward_flops(pair.config, context, context + 1)
    )


def _our_step(benchmark, pair: Pair, shapes: Shapes, context: int, impl: str) -> None:
    """Our engine's own decode step (`ModelRunner.run` of one position, reading its context in the pool as
    `generate` does) on a sequence whose first `context` tokens are served from the prefix cache; every round
    rewrites the same position."""
    with decode_request(pair.ours, pair.base[: context + 1]) as req:
        step = lambda: pair.ours.runner.run([(req, 1)])[1].argmax().item()  # noqa: E731
        measure(
            benchmark,
            pair,
            step,
            shapes.budget_s,
            setup=lambda: setattr(req.seq, "num_kv", context),
            **_info(benchmark, pair, context, impl),
        )


def test_decode_step_batch(benchmark, pair: Pair, shapes: Shapes, step_batch: int) -> None:
    """One engine step (`Engine.step`: scheduling, the batched forward, sampling, detokenizing) while
    `step_batch` requests decode together, each over the `batch_context` cached tokens and a token of its
    own: with one attention dispatch per layer, 8 at once should cost little more than one. Public API only,
    so the same case times any version of the engine."""
    context = shapes.batch_context
    prompts = [pair.base[:context] + [pair.base[context + i]] for i in range(step_batch)]
    benchmark.group = f"decode step batch @{context} {pair.device.type}"
    _time_decoding(benchmark, pair, shapes, prompts, MAX_ROUNDS + 16, "decode_step_batch", context=context)


def test_decode_step_scattered(benchmark, pair: Pair, shapes: Shapes) -> None:
    """One engine step while 8 requests decode together, each over a prompt of its own of
    `scattered_context` tokens (nothing shared): the prompts prefilled together, chunk by chunk, beside the
    first ones' decoding, so each request's blocks lie in runs of consecutive blocks (SmolLM2 at 2,048
    tokens: 20, 20, 19, 20, 10, 10, 1 and 1 runs), as a busy server's do. What the step's attention copies
    from the pool is what this case tells apart (a gather of every row's whole context each layer, or runs
    read in place); the record keeps the runs per row. Public API only, so the same case times any version
    of the engine."""
    context = shapes.scattered_context
    prompts = [pair.tokens(context, seed=100 + i) for i in range(SCATTERED_ROWS)]
    benchmark.group = f"decode step scattered @{context} {pair.device.type}"
    # the first decodes while the last prefills: room for as many tokens as a prompt, then for the rounds
    room = context + MAX_ROUNDS + 16
    _time_decoding(benchmark, pair, shapes, prompts, room, "decode_step_scattered", context=context)


def _time_decoding(
    benchmark, pair: Pair, shapes: Shapes, prompts: list[list[int]], room: int, case: str, **info
) -> None:
    """`Engine.step` timed once every request of `prompts` (each allowed `room` new tokens) is past its
    prefill, so that each step decodes all of them; the record keeps the runs of consecutive blocks of each
    request's block table. The requests are aborted after."""
    e = pair.ours
    ids = [e.add_request(p, max_new_tokens=room, ignore_eos=True) for p in prompts]
    try:
        pending = set(ids)
        while pending:
            for out in e.step():
                if out.error is not None:
                    raise out.error
                pending.discard(out.request_id)
        if any(rid not in e.requests for rid in ids):
            raise RuntimeError(f"a request decoded {room} tokens before the last prompt was prefilled")
        runs = [_runs(e.requests[rid].seq.block_table) for rid in ids]
        measure(
            benchmark,
            pair,
            e.step,
            shapes.budget_s,
            case=case,
            impl="ours",
            batch=len(ids),
            runs_per_row=runs,
            **info,
        )
    finally:
        for rid in ids:
            e.abort(rid)


def _runs(table: list[int]) -> int:
    """Runs of consecutive block ids in a block table."""
    return sum(1 for i, block in enumerate(table) if i == 0 or block != table[i - 1] + 1)


def test_decode_weight_stream(benchmark, pair: Pair, shapes: Shapes) -> None:
    """Decode's fixed cost: our decode step against its weight stream alone, the two alternating round by
    round. The step is `ModelRunner.run` of one row at the smallest decode context the shapes keep for the
    model (512 tokens in the full shapes; every length over `--model`'s context is left out, `Shapes.within`)
    and its greedy token read back; the stream is one row through every matrix the step multiplies by (the
    same `linear` calls, in the same order, nothing else). A decode step reads every weight once, so on a CPU
    the stream is its floor, and step / stream - 1 is what attention, norms, RoPE, the K/V writes, the
    runner and the host add on top. Recorded as `ratio` (median per pair, with min-max) beside the target,
    step <= (1 + FIXED_COST) x stream; the case fails only when the pairs show the target missed (a sign test
    of the per-pair ratios against it, p <= 0.05)."""
    context = min(shapes.contexts)
    rows = weight_rows(pair.ours.model)
    with decode_request(pair.ours, pair.base[: context + 1]) as req:

        def step() -> int:
            req.seq.num_kv = context  # every round rewrites the same position
            return pair.ours.runner.run([(req, 1)])[1].argmax().item()

        benchmark.group = f"decode @{context} {pair.device.type}"
        ratios = measure_alternating(
            benchmark,
            pair,
            {"step": step, "weights": weight_stream(rows)},
            shapes.budget_s,
            ALTERNATING_ROUNDS,
            case="decode_weights",
            context=context,
            weight_bytes=sum(w.numel() * w.element_size() for w, _ in rows),
        )
    target = 1 + FIXED_COST
    word, p = verdict(ratios, target)
    benchmark.extra_info.update(target=f"step <= {target:.2f} x weights", verdict=word, p=p)
    print(
        f"\ndecode step / weight stream @{context} ({pair.info['dtype']}): {statistics.median(ratios):.3f} "
        f"[{min(ratios):.3f}-{max(ratios):.3f}], n={len(ratios)}; target <= {target:.2f}: {word} (p={p:.3g}), "
        f"load {os.getloadavg()[0]:.2f}"
    )
    assert word != "higher", f"the decode step's fixed cost is over {FIXED_COST:.0%} of its weight stream"
