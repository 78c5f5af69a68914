"""Benchmark records the script tests share, as the benchmarks write their `extra_info`."""

from __future__ import annotations

# our warm TTFT interleaved with transformers' DynamicCache and StaticCache (benchmarks/test_prefix.py)
WARM_BOTH_CACHES = {
    "case": "warm_contiguous",
    "impl": "ours/DynamicCache/StaticCache",
    "cached": 2048,
    "new": 64,
    "ratio": 0.9,
    "ratio_min": 0.85,
    "ratio_max": 0.97,
    "ratios": {"StaticCache": {"ratio": 1.01, "ratio_min": 0.95, "ratio_max": 1.08}},
    "pairs": 6,
    "memory_share": 0.04,
}
