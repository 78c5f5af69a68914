"""Timing statistics: repeated measurements are reported as median and min/max, never as one number."""

from __future__ import annotations

import statistics
from collections.abc import Iterable


def spread(values: Iterable[float]) -> dict[str, float]:
    """Median and min/max of repeated timings (the shared machines here are noisy: report the spread)."""
    v = sorted(values)
    return {"median": statistics.median(v), "min": v[0], "max": v[-1], "n": len(v)}
