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


def rank_sum(a: Sequence[float], b: Sequence[float]) -> tuple[str, float | None]:
    """Two independent groups (not paired: e.g. right against wrong answers): ('higher' | 'lower' | 'within
    noise' | 'too few values', p) of `a` against `b` by the two-sided Mann-Whitney rank-sum test, normal
    approximation with the tie correction (fair from about 5 values a side; fewer say 'too few values')."""
    n1, n2 = len(a), len(b)
    if min(n1, n2) < 5:
        return "too few values", None
    pooled = sorted([(v, 0) for v in a] + [(v, 1) for v in b])
    ranks: list[float] = [0.0] * len(pooled)
    ties = 0.0
    i = 0
    while i < len(pooled):  # tied values share the mean of their ranks
        j = i
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        ranks[i : j + 1] = [(i + j) / 2 + 1] * (j - i + 1)
        ties += (j - i + 1) ** 3 - (j - i + 1)
        i = j + 1
    u = sum(r for r, (_, group) in zip(ranks, pooled, strict=True) if group == 0) - n1 * (n1 + 1) / 2
    n = n1 + n2
    var = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1)))
    if var <= 0:
        return "within noise", 1.0
    z = (u - n1 * n2 / 2) / math.sqrt(var)
    p = math.erfc(abs(z) / math.sqrt(2))
    if p > ALPHA:
        return "within noise", p
    return ("higher" if z > 0 else "lower"), p
