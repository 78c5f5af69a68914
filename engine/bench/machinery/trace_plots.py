"""Plots of a trace analysis: cumulative cached share per cache rule, and the local cache's hit rate
against its capacity per eviction policy."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from engine.traces.analysis import AnalyzedRequest  # noqa: E402
from engine.traces.pressure import PressurePoint  # noqa: E402


def plot_rule_shares(
    records: Sequence[AnalyzedRequest], rules: Sequence[str], path: Path, title: str
) -> None:
    """Per rule: prompt tokens served from cache so far over prompt tokens so far, request by request."""
    fig, ax = plt.subplots(figsize=(8, 4.5))
    x = range(1, len(records) + 1)
    prompt = list(itertools.accumulate(r.prompt_tokens for r in records))
    for rule in rules:
        cached = itertools.accumulate(r.served[rule].cached_tokens for r in records)
        ax.plot(x, [100 * c / p for c, p in zip(cached, prompt, strict=True)], marker="o", ms=3, label=rule)
    ax.set(
        xlabel="request (in the order sent)",
        ylabel="prompt tokens from cache so far (%)",
        ylim=(-3, 103),
        title=title,
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_pressure(points: Sequence[PressurePoint], path: Path, title: str) -> None:
    """Hit rate of the local cache against its capacity, one line per eviction policy."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for policy in dict.fromkeys(p.policy for p in points):
        mine = [p for p in points if p.policy == policy]
        ax.plot([p.cache_tokens for p in mine], [100 * p.hit_rate for p in mine], marker="o", label=policy)
    ax.set_xscale("log")
    ax.set(
        xlabel="local cache capacity (tokens, log scale)",
        ylabel="prompt tokens from cache (%)",
        ylim=(-3, 103),
        title=title,
    )
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, title="eviction")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
