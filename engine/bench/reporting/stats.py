"""Timing statistics: repeated measurements are reported as median and min/max with their count, never as
one number; ratios between two arms carry the range of their per-pass ratios."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Sequence
from typing import Any


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


def verdict(a: Sequence[float], b: Sequence[float]) -> str:
    """'lower' / 'higher' when every value of `a` is below / above every value of `b` (the min-max ranges do
    not overlap), else 'within noise'; one value on either side has no spread to judge by."""
    if len(a) < 2 or len(b) < 2:
        return "one pass: no spread"
    if max(a) < min(b):
        return "lower"
    if min(a) > max(b):
        return "higher"
    return "within noise"
