"""Plots of the approximate-KV benches: decision agreement per variant, per-layer cosine to the exact run,
and TTFT against prompt length."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from engine.viz.charts import line_chart  # noqa: E402


def plot_agreement(rows: Sequence[dict[str, Any]], path: Path, title: str) -> None:
    """Grouped bars: decision agreement with the exact run per variant, direct answer vs step-by-step."""
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    fig, ax = plt.subplots(figsize=(10.5, 4.5))
    for k, cot in enumerate((False, True)):
        got = {r["variant"]: r["agree"] for r in rows if r["cot"] == cot}
        if not got:  # a partial run (Ctrl-C) before any run of this setting
            continue
        values = [got[v] for v in variants]
        xs = [i + (k - 0.5) * 0.38 for i in range(len(variants))]
        bars = ax.bar(
            xs,
            [100 * x for x in values],
            width=0.36,
            label="think step by step first" if cot else "direct answer",
        )
        ax.bar_label(bars, fmt="%.0f", fontsize=7)
    ax.set_xticks(range(len(variants)), variants)
    ax.set(ylabel="decision = exact run's decision (% of pairs)", ylim=(0, 110), title=title)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0)  # beside, off the bars
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_layer_cosine(summary: Sequence[dict[str, Any]], path: Path, title: str) -> None:
    """Median cosine of the last prompt token's hidden state to the exact run's, per layer and variant, each
    dimension standardized by the exact run's mean and spread (`engine.approx.fidelity`)."""
    series = {
        f"{s['variant']}{', step by step' if s.get('cot') else ''}": (
            list(range(len(s["layer_cosine"]))),
            s["layer_cosine"],
        )
        for s in summary
        if s["variant"] != "exact"
    }
    line_chart(
        series,
        path,
        title=title,
        xlabel="layer",
        ylabel="cosine to the exact hidden state\n(standardized per dimension, median)",
    )


def plot_ttft_vs_length(
    rows: Sequence[dict[str, Any]], variants: Sequence[str], path: Path, title: str
) -> None:
    """TTFT against the prompt's length, one line per arm (splicing grows ~linearly, recomputing faster)."""
    series = {}
    for v in variants:
        points = sorted((r["prompt_tokens"], r["ttft_ms"]) for r in rows if r["variant"] == v)
        series[v] = ([p[0] for p in points], [p[1] for p in points])
    line_chart(series, path, title=title, xlabel="prompt tokens", ylabel="TTFT (ms)")
