"""Approximate-run summaries: medians, worst cases, rates and per-layer medians per variant."""

from __future__ import annotations

from engine.bench.harness.approx_runs import flat, shown, summarize_variants
from engine.bench.reporting.replay_report import table


def row(variant: str, cosine: float, kl: float, ttft: float, agree: bool) -> dict:
    return {
        "variant": variant,
        "ttft_ms": ttft,
        "ttft_ratio": ttft / 100,
        "computed_tokens": 10,
        "approximate_tokens": 90,
        "cached_tokens": 0,
        "cosine": cosine,
        "kl": kl,
        "top1_agree": agree,
        "continuation_agree": agree,
        "first_difference": 8 if agree else 0,
        "layer_cosine": [1.0, cosine],
    }


def test_summary_per_variant() -> None:
    rows = [
        row("splice", 0.99, 0.2, 30, True),
        row("splice", 0.97, 0.5, 10, False),
        row("splice", 0.98, 0.1, 20, True),
    ]
    (s,) = summarize_variants([*rows, row("unlisted", 1.0, 0.0, 1, True)], ["splice", "absent"])
    assert (s["variant"], s["n"], s["cosine"], s["cosine_min"], s["kl"], s["kl_max"]) == (
        "splice",
        3,
        0.98,
        0.97,
        0.2,
        0.5,
    )
    assert (s["ttft_ms"], s["ttft_ms_min"], s["ttft_ms_max"], s["ttft_ratio"]) == (20, 10, 30, 0.2)
    assert (s["ttft_ratio_min"], s["ttft_ratio_max"]) == (0.1, 0.3)
    printed = table([s], ["variant", "ttft_ms", "ttft_ratio"]).splitlines()
    assert "ttft_ms [min–max]" in printed[0] and "20 [10–30]" in printed[2]
    assert "0.200 [0.100–0.300]" in printed[2]
    assert s["top1"] == s["greedy_same"] == 2 / 3 and s["layer_cosine"] == [1.0, 0.98]


def test_flat_and_shown_rows() -> None:
    r = row("edit", 0.999771, 0.0, 5, True)
    assert "layer_cosine" not in flat([r])[0] and flat([r])[0]["cosine"] == 0.999771
    assert shown([r])[0]["cosine"] == "0.99977" and r["cosine"] == 0.999771  # the row itself is unchanged
