"""Side-by-side timings with the two sides alternating call by call, for machines too noisy for the suite.

    python scripts/interleaved.py [--device cpu] [--prefill 512 2048] [--warm 1024 4096] [--contexts 2048 4096]
                                  [--rounds 7]

pytest-benchmark times one implementation's rounds, then the other's: on a shared machine a neighbour's burst
lands on one side only. Here every round runs both sides back to back (which goes first alternates), so both
meet the same load. Three comparisons on `synthetic:qwen2.5-0.5b` (or `--model`):
- prefill N: our cold prefill against `transformers` (same weights);
- decode @N: our decode step for eight sequences at once against the same step for one (each reading its
  context in the pool);
- warm L: our prefill of L tokens with one block, and with L/2 tokens, served from the prefix cache, against
  our cold prefill of the same L tokens, and against the FLOP model's ideal for that ratio;
- batch N: N requests over one cached context decoding 32 tokens each in one `generate_many`, against one
  request doing the same (output tokens/s gain = N / time ratio);
- solo: one request through the engine's step loop (`generate`: scheduling, sampling, detokenizing) against
  the same forwards and greedy picks called directly, what the step loop adds.
Each line: median [min-max] of each side over the rounds, and their ratio as every paired command gives
it: the median [min-max] of the per-round ratios, n, and the sign test's p and verdict
(`engine.bench.reporting.stats.paired`).
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import os
import statistics
import sys
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.harness import Pair, Shapes, alternating_times, decode_request  # noqa: E402
from engine.bench.reporting.results import git_commit  # noqa: E402
from engine.bench.reporting.stats import paired  # noqa: E402
from engine.inspect.flops import ideal_cached_ratio  # noqa: E402
from engine.runtime.request import Request  # noqa: E402

TOKENS = 32  # decoded per request in the batch and solo comparisons (EOS ignored)


def alternate(pair: Pair, a: Callable[[], object], b: Callable[[], object], rounds: int) -> tuple[str, float]:
    """One untimed call of each, then `rounds` of both (a first in even rounds, b first in odd ones).
    Returns the report line and the median of the per-round ratios a / b."""
    a(), b()
    timed = alternating_times({"a": a, "b": b}, rounds, pair.device)
    times = (timed["a"], timed["b"])
    ma, mb = statistics.median(times[0]), statistics.median(times[1])
    spans = [f"{min(t) * 1e3:.0f}-{max(t) * 1e3:.0f}" for t in times]
    c = paired(times[0], times[1], "rounds")
    line = (
        f"{ma * 1e3:8.1f} ms [{spans[0]}]  {mb * 1e3:8.1f} ms [{spans[1]}]  ratio {c['ratio']:.3f} "
        f"[{c['ratio_min']:.3f}-{c['ratio_max']:.3f}], n={c['n']}, p={c['p']:.3f}: {c['verdict']}"
    )
    return line, c["ratio"]


def prefill(pair: Pair, n: int, rounds: int) -> str:
    ids = pair.tokens(n, seed=1)
    line, _ = alternate(
        pair,
        lambda: pair.ours.generate(ids, max_new_tokens=1, cache=False),
        lambda: pair.theirs_forward(ids),
        rounds,
    )
    return f"prefill {n:>5}: ours {line} (ours / transformers)"


def warm(pair: Pair, length: int, cached: int, rounds: int) -> str:
    """Our prefill of `length` tokens whose first `cached` are served from cache (new tokens after them on
    every call, so the rest is never a hit) against our cold prefill of `length` tokens."""
    seeds, cold_ids = itertools.count(length * 10**6), pair.tokens(length, seed=3)
    # earlier rounds may have evicted the prefix: publish it again
    pair.ours.generate(pair.base[: cached + 1], max_new_tokens=1)

    def warm_call() -> None:
        gen = pair.ours.generate(
            pair.base[:cached] + pair.tokens(length - cached, next(seeds)), max_new_tokens=1
        )
        assert gen.usage.cached_tokens == cached, gen.usage

    line, ratio = alternate(
        pair, warm_call, lambda: pair.ours.generate(cold_ids, max_new_tokens=1, cache=False), rounds
    )
    ideal = ideal_cached_ratio(pair.config, cached, length - cached)
    return f"warm {length:>5} k={cached:>5}: {line} (warm / cold); ideal {ideal:.3f}, warm / ideal {ratio / ideal:.3f}"


def decode(pair: Pair, context: int, rounds: int) -> str:
    """The engine's decode step at `context` cached tokens: eight sequences in one step against one."""
    ids = pair.base[: context + 1]  # the first `context` tokens come from the cache
    with ExitStack() as stack:
        reqs = [stack.enter_context(decode_request(pair.ours, ids)) for _ in range(8)]

        def step(batch: list[Request]) -> object:
            for req in batch:
                req.seq.num_kv = context  # every round rewrites the same position
            return pair.ours.runner.run([(req, 1) for req in batch])[1]

        line, _ = alternate(pair, lambda: step(reqs), lambda: step(reqs[:1]), rounds)
    return f"decode @{context:>5}: {line} (8 sequences / 1)"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--model", default="synthetic:qwen2.5-0.5b", help="any model string engine.load takes"
    )
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default=None)
    parser.add_argument("--prefill", type=int, nargs="*", default=[512, 2048], help="cold prefill lengths")
    parser.add_argument("--warm", type=int, nargs="*", default=[1024], help="warm prefill lengths L")
    parser.add_argument("--contexts", type=int, nargs="*", default=[2048, 4096], help="decode contexts")
    parser.add_argument("--batch", type=int, nargs="*", default=[], help="concurrent requests, e.g. 4 8 16")
    parser.add_argument("--batch-context", type=int, default=1024, help="their cached context")
    parser.add_argument("--solo", action="store_true", help="the step loop against bare forwards")
    parser.add_argument(
        "--rounds", type=int, default=7, help="prefill rounds; decode runs three times as many"
    )
    args = parser.parse_args()
    block = 16
    cached = sorted(
        {block, args.batch_context + max(args.batch, default=1)}
        | {n // 2 for n in args.warm}
        | set(args.contexts)
    )
    shapes = Shapes((), tuple(cached), (1,), (block,), (32, 16), budget_s=0.0)
    pair = Pair(args.model, args.device, args.dtype, shapes)
    pair.ours.kv.touch()  # warm calls take fresh blocks, the cold arm reuses its own: no first touch in either
    started = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    print(f"commit {git_commit()}, {started}, load average {load()} at the start")
    print(f"{pair.info}, alternating rounds: median [min-max] of each side")
    for n in args.prefill:
        print(prefill(pair, n, args.rounds), flush=True)
    for context in args.contexts:
        print(decode(pair, context, 3 * args.rounds), flush=True)
    # L/2 first: the rounds with one cached block publish enough new blocks to evict the rest of the base
    for n in args.warm:
        for k in (n // 2, block):
            print(warm(pair, n, k, args.rounds), flush=True)
    for n in args.batch:
        print(batch(pair, n, args.batch_context, args.rounds), flush=True)
    if args.solo:
        print(solo(pair, args.batch_context, args.rounds), flush=True)
    print(f"load average {load()} at the end")
    return 0


def batch(pair: Pair, n: int, context: int, rounds: int) -> str:
    ids = [pair.base[:context] + [pair.base[context + i]] for i in range(n)]
    line, ratio = alternate(
        pair,
        lambda: pair.ours.generate_many(ids, max_new_tokens=TOKENS, ignore_eos=True),
        lambda: pair.ours.generate_many(ids[:1], max_new_tokens=TOKENS, ignore_eos=True),
        rounds,
    )
    return f"batch {n:>2} @{context}: {line} ({n} / 1 requests); output tokens/s x{n / ratio:.2f}"


def solo(pair: Pair, context: int, rounds: int) -> str:
    """The step loop against the bare forwards: the same request's prefill and TOKENS - 1 decode steps."""
    ids = pair.base[:context] + [pair.base[context]]
    ours = pair.ours

    def bare() -> None:
        with decode_request(ours, ids, room=TOKENS) as req:
            req.seq.num_kv = context  # the cached context, then the last prompt token and the decode steps
            for _ in range(TOKENS - 1):
                req.seq.token_ids.append(int(ours.runner.run([(req, req.pending)])[1].argmax()))
                ours.blocks.grow(req.seq, len(req.seq))

    line, _ = alternate(
        pair, lambda: ours.generate(ids, max_new_tokens=TOKENS - 1, ignore_eos=True), bare, rounds
    )
    return f"solo @{context}: {line} (generate / bare forwards)"


def load() -> str:
    """The 1, 5 and 15 minute load averages: others' work on the machine skews every timing here."""
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    sys.exit(main())
