"""Timing statistics: repeated measurements are reported as median and min/max with their count, never as
one number. Two arms measured side by side are compared pass by pass: a ratio is always the median of the
per-pass ratios (with their min and max), and a verdict comes from an exact two-sided sign test of those
ratios against 1, never from whether two ranges overlap."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from typing import Any

ALPHA = 0.05  # two-sided level of every verdict


def spread(values: Iterable[float]) -> dict[str, float]:
    """Median and min/max of repeated timings, and n (the shared machines here are noisy: report the spread)."""
    v = sorted(values)
    return {"median": statistics.median(v), "min": v[0], "max": v[-1], "n": len(v)}


def per_pass(
    series: Sequence[Sequence[float]], reduce: Callable[[Sequence[float]], Any] = statistics.median
) -> list[Any]:
    """One value per pass from several series of per-pass timings (e.g. the turns of a conversation):
    `reduce` over the series, pass by pass, for the passes every series completed (after a Ctrl-C the later
    turns can be a pass short)."""
    return [reduce(values) for values in zip(*series, strict=False)]


def pass_ratios(numerator: Sequence[float], denominator: Sequence[float]) -> list[float]:
    """Ratio of two arms measured in the same passes, pass by pass (pairs share the machine's state), for
    the passes both completed."""
    return [a / b for a, b in zip(numerator, denominator, strict=False) if b > 0]


def sign_test(values: Sequence[float], center: float = 1.0) -> tuple[int, float]:
    """Exact two-sided sign test of paired values (per-pass ratios, or differences with center 0) against
    `center`: (n, p) where n counts the values off the center (ties carry no sign and are dropped) and p is
    the probability, under no effect (each sign equally likely), of a split at least as uneven."""
    above = sum(v > center for v in values)
    below = sum(v < center for v in values)
    n = above + below
    if n == 0:
        return 0, 1.0
    tail = sum(math.comb(n, i) for i in range(min(above, below) + 1)) / 2**n
    return n, min(1.0, 2 * tail)


def min_passes(alpha: float = ALPHA) -> int:
    """The fewest pairs at which a sign test can reach `alpha` at all (every sign alike: p = 2 / 2^n); 6 at
    0.05 (p = 0.031; 5 pairs give at best 0.0625)."""
    return next(n for n in range(1, 64) if 2 / 2**n <= alpha)


MIN_PASSES = min_passes()


def verdict(values: Sequence[float], center: float = 1.0, unit: str = "passes") -> tuple[str, float]:
    """('lower' | 'higher' | 'within noise' | 'too few <unit>', p) for paired values against `center` by
    the sign test at ALPHA: 'lower' / 'higher' when p <= ALPHA, on the side of the median; 'too few' when
    fewer than MIN_PASSES values carry a sign, where no split could reach ALPHA."""
    n, p = sign_test(values, center)
    if n < MIN_PASSES:
        return f"too few {unit}", p
    if p > ALPHA:
        return "within noise", p
    return ("lower" if statistics.median(values) < center else "higher"), p


def paired(numerator: Sequence[float], denominator: Sequence[float], unit: str = "passes") -> dict[str, Any]:
    """Two arms measured in the same passes: the median [min, max] of their per-pass ratios, n, the sign
    test's p and the verdict (keys ratio, ratio_min, ratio_max, n, p, verdict)."""
    ratios = pass_ratios(numerator, denominator)
    if not ratios:
        return {"ratio": None, "ratio_min": None, "ratio_max": None, "n": 0, "p": None, "verdict": "no pairs"}
    word, p = verdict(ratios, 1.0, unit)
    s = spread(ratios)
    return {
        "ratio": s["median"],
        "ratio_min": s["min"],
        "ratio_max": s["max"],
        "n": s["n"],
        "p": p,
        "verdict": word,
    }
