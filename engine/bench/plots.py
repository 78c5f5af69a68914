"""Plots of replayed conversations: TTFT per turn, cached share per turn, and a token strip per
conversation showing where reuse ended on one turn."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from engine.bench.replay import TurnRecord  # noqa: E402


def _by_conversation(records: Sequence[TurnRecord]) -> dict[str, list[TurnRecord]]:
    out: dict[str, list[TurnRecord]] = {}
    for r in records:
        out.setdefault(r.conversation, []).append(r)
    return out


def plot_ttft(records: Sequence[TurnRecord], path: Path, title: str) -> None:
    """Warm TTFT per turn (median, min-max bars) per conversation, with the cold baseline dashed."""
    fig, ax = plt.subplots(figsize=(8, 4.5))
    groups = _by_conversation(records)
    for name, rs in groups.items():
        x = [r.turn for r in rs]
        y = [r.ttft_s * 1000 for r in rs]
        err = [[(r.ttft_s - r.ttft_min_s) * 1000 for r in rs], [(r.ttft_max_s - r.ttft_s) * 1000 for r in rs]]
        ax.errorbar(x, y, yerr=err, marker="o", capsize=3, label=name)
    if any(r.cold_ttft_s for r in records):
        first = next(iter(groups.values()))
        ax.plot([r.turn for r in first], [r.cold_ttft_s * 1000 for r in first], "k--", alpha=0.6,
                label=f"cold (no cache), {first[0].conversation}")  # fmt: skip
    ax.set(xlabel="turn", ylabel="TTFT (ms)", title=title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_cached_share(records: Sequence[TurnRecord], path: Path, title: str) -> None:
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for name, rs in _by_conversation(records).items():
        ax.plot([r.turn for r in rs], [100 * r.cached_share for r in rs], marker="o", label=name)
    ax.set(xlabel="turn", ylabel="prompt tokens served from cache (%)", ylim=(-3, 103), title=title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_token_strip(records: Sequence[TurnRecord], turn: int, path: Path, title: str) -> None:
    """One bar per conversation: its prompt on `turn`, cached tokens green, computed orange, regions marked."""
    rows = [r for r in records if r.turn == turn]
    fig, ax = plt.subplots(figsize=(11, 0.9 * len(rows) + 1.4))
    width = max(r.prompt_tokens for r in rows)
    for y, r in enumerate(rows):
        ax.barh(y, r.cached_tokens, color="#3a9d5d", height=0.55)
        ax.barh(y, r.computed_tokens, left=r.cached_tokens, color="#e8833a", height=0.55)
        for label, start, end in r.regions:
            ax.plot([start, start], [y - 0.32, y + 0.32], color="black", lw=0.6)
            if (end - start) / width > 0.05:
                ax.text((start + end) / 2, y + 0.33, label, ha="center", va="bottom", fontsize=6.5)
    ax.set_yticks(range(len(rows)), [r.conversation for r in rows])
    ax.invert_yaxis()
    ax.set(xlabel=f"prompt token index on turn {turn} (green: from cache, orange: computed)", xlim=(0, width),
           title=title)  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
