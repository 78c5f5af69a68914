"""Side-by-side timings with the two sides alternating call by call, for machines too noisy for the suite.

    python scripts/interleaved.py [--device cpu] [--prefill 512 2048] [--contexts 2048 4096] [--rounds 5]

pytest-benchmark times one implementation's rounds, then the other's: on a shared machine a neighbour's burst
lands on one side only. Here every round runs A then B, so both sides meet the same load. Two comparisons on
`synthetic:qwen2.5-0.5b`: our cold prefill against `transformers` (same weights), and our decode step reading
its context from the decoding window against the same step gathering it from the cache's blocks.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.harness import Pair, Shapes  # noqa: E402
from engine.devices import now  # noqa: E402
from engine.kv_cache import SequenceKV  # noqa: E402
from engine.sequence import Sequence  # noqa: E402


def alternate(pair: Pair, a: Callable[[], object], b: Callable[[], object], rounds: int) -> str:
    """One untimed call of each, then `rounds` of (a, b); medians, ranges and the ratio of medians."""
    a(), b()
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(rounds):
        for fn, out in ((a, times[0]), (b, times[1])):
            start = now(pair.device)
            fn()
            out.append(now(pair.device) - start)
    ma, mb = statistics.median(times[0]), statistics.median(times[1])
    spans = [f"{min(t) * 1e3:.0f}-{max(t) * 1e3:.0f}" for t in times]
    return f"{ma * 1e3:8.1f} ms [{spans[0]}]  {mb * 1e3:8.1f} ms [{spans[1]}]  ratio {ma / mb:.3f}"


def prefill(pair: Pair, n: int, rounds: int) -> str:
    ids = pair.tokens(n, seed=1)
    line = alternate(pair, lambda: pair.ours.generate(ids, max_new_tokens=1, cache=False),
                     lambda: pair.theirs_forward(ids), rounds)  # fmt: skip
    return f"prefill {n:>5}: ours {line} (ours / transformers)"


def decode(pair: Pair, context: int, rounds: int) -> str:
    seq = Sequence(pair.base[: context + 1])
    pair.ours.blocks.admit(seq, context + 1)  # the first `context` tokens come from the cache
    try:
        window = SequenceKV.from_blocks(pair.ours.kv, seq.block_table, context, context + 1)
        line = alternate(pair, lambda: pair.ours._forward(seq, context, context + 1, window),
                         lambda: pair.ours._forward(seq, context, context + 1, None), rounds)  # fmt: skip
    finally:
        pair.ours.blocks.release(seq)
    return f"decode @{context:>5}: window {line} (window / gather)"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default=None)
    parser.add_argument("--prefill", type=int, nargs="*", default=[512, 2048], help="cold prefill lengths")
    parser.add_argument("--contexts", type=int, nargs="*", default=[2048, 4096], help="decode contexts")
    parser.add_argument(
        "--rounds", type=int, default=5, help="prefill rounds; decode runs three times as many"
    )
    args = parser.parse_args()
    shapes = Shapes((), tuple(args.contexts) or (16,), (1,), (16,), (32, 16), budget_s=0.0)
    pair = Pair("synthetic:qwen2.5-0.5b", args.device, args.dtype, shapes)
    print(f"{pair.info}, alternating rounds: median [min-max] of each side")
    for n in args.prefill:
        print(prefill(pair, n, args.rounds), flush=True)
    for context in args.contexts:
        print(decode(pair, context, 3 * args.rounds), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
