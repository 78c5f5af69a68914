"""Plots of replayed conversations: TTFT per turn, cached share per turn, and a token strip per
conversation showing where reuse ended on one turn; of trace analyses: cumulative cached share per cache rule
and the local cache's hit rate against its capacity."""

from __future__ import annotations

import itertools
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from engine.bench.harness.replayer import TurnRecord  # noqa: E402
from engine.bench.reporting.stats import per_pass, spread  # noqa: E402
from engine.traces.analysis import AnalyzedRequest  # noqa: E402
from engine.traces.pressure import PressurePoint  # noqa: E402


def _by_conversation(records: Sequence[TurnRecord]) -> dict[str, list[TurnRecord]]:
    out: dict[str, list[TurnRecord]] = {}
    for r in records:
        out.setdefault(r.conversation, []).append(r)
    return out


def _save(fig: plt.Figure, path: Path, *axes: plt.Axes) -> None:
    for ax in axes:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # turns are whole numbers
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _bars(median: Sequence[float], lo: Sequence[float], hi: Sequence[float]) -> list[list[float]]:
    """Error-bar offsets below and above each median."""
    return [
        [m - a for m, a in zip(median, lo, strict=True)],
        [b - m for m, b in zip(median, hi, strict=True)],
    ]


def _passes(records: Sequence[TurnRecord]) -> int:
    return min((r.passes for r in records), default=0)


def plot_ttft(records: Sequence[TurnRecord], path: Path, title: str) -> None:
    """Warm TTFT per turn (median, min-max bars) per conversation, with the cold baseline dashed."""
    fig, ax = plt.subplots(figsize=(8, 4.5))
    groups = _by_conversation(records)
    for name, rs in groups.items():
        y = [r.ttft_s * 1000 for r in rs]
        err = _bars(y, [r.ttft_min_s * 1000 for r in rs], [r.ttft_max_s * 1000 for r in rs])
        ax.errorbar([r.turn for r in rs], y, yerr=err, marker="o", capsize=3, label=name)
    if any(r.cold_ttft_s for r in records):
        first = next(iter(groups.values()))
        y = [r.cold_ttft_s * 1000 for r in first]
        err = _bars(y, [r.cold_ttft_min_s * 1000 for r in first], [r.cold_ttft_max_s * 1000 for r in first])
        ax.errorbar(
            [r.turn for r in first],
            y,
            yerr=err,
            fmt="k--",
            capsize=3,
            alpha=0.6,
            label=f"cold (no cache), {first[0].conversation}",
        )
    ax.set(
        xlabel="turn",
        ylabel=f"TTFT (ms): median of {_passes(records)} passes, bars min–max",
        title=title,
    )
    _save(fig, path, ax)


def plot_cached_share(records: Sequence[TurnRecord], path: Path, title: str) -> None:
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for name, rs in _by_conversation(records).items():
        ax.plot([r.turn for r in rs], [100 * r.cached_share for r in rs], marker="o", label=name)
    ax.set(xlabel="turn", ylabel="prompt tokens served from cache (%)", ylim=(-3, 103), title=title)
    _save(fig, path, ax)


def plot_cumulative(records: Sequence[TurnRecord], path: Path, title: str) -> None:
    """Cumulative computed tokens and cumulative TTFT over the run, per conversation; the TTFT is summed
    within each pass, then shown as the median over passes with min-max bars."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for name, rs in _by_conversation(records).items():
        turns = [r.turn for r in rs]
        left.plot(turns, list(itertools.accumulate(r.computed_tokens for r in rs)), marker="o", label=name)
        passes = per_pass([r.ttft_passes_s for r in rs], list)  # passes that every turn completed
        sums = [list(itertools.accumulate(run)) for run in passes]
        per_turn = [spread(values) for values in zip(*sums, strict=True)]
        y = [s["median"] for s in per_turn]
        err = _bars(y, [s["min"] for s in per_turn], [s["max"] for s in per_turn])
        right.errorbar(turns, y, yerr=err, marker="o", capsize=2, label=name)
    left.set(xlabel="turn", ylabel="computed prompt tokens, cumulative")
    right.set(xlabel="turn", ylabel="TTFT (s), cumulative")
    right.set_title(f"median of {_passes(records)} passes, bars min–max", fontsize=9)
    fig.suptitle(title)
    _save(fig, path, left, right)


def plot_compaction(records: Sequence[TurnRecord], path: Path, title: str) -> None:
    """A 2x2 grid: budget utilization (top) and cached share (bottom) per turn, stable prefix (left) and
    timestamp-first prefix (right); one line per policy, compaction events marked."""
    fig, axes = plt.subplots(2, 2, figsize=(12, 7), sharex=True, sharey="row")
    for col, prefix in enumerate(("stable", "timestamp-first")):
        for name, rs in _by_conversation(
            [r for r in records if r.conversation.endswith("/" + prefix)]
        ).items():
            policy, turns = name.split("/")[0], [r.turn for r in rs]
            (line,) = axes[0][col].plot(turns, [100 * r.meta["utilization"] for r in rs], label=policy)
            axes[1][col].plot(turns, [100 * r.cached_share for r in rs], color=line.get_color(), label=policy)
            marks = [r for r in rs if r.meta["compaction"]]
            axes[0][col].scatter(
                [r.turn for r in marks],
                [100 * r.meta["utilization"] for r in marks],
                color=line.get_color(),
                s=14,
            )
        axes[0][col].set(title=f"{prefix} prefix", ylabel="budget used (%)")
        axes[1][col].set(xlabel="turn", ylabel="prompt tokens from cache (%)", ylim=(-3, 103))
    for ax in axes.flat:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.suptitle(f"{title} (dots: compaction events)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


class StripRecord(Protocol):
    conversation: str
    turn: int
    prompt_tokens: int
    cached_tokens: int
    computed_tokens: int
    regions: list[tuple[str, int, int]]


def plot_token_strip(records: Sequence[TurnRecord], turn: int, path: Path, title: str) -> None:
    """One bar per conversation: its prompt on `turn`; cached tokens green, computed orange, regions."""
    plot_strip([r for r in records if r.turn == turn], path, title, f"prompt token index on turn {turn}")


def plot_strip(rows: Sequence[StripRecord], path: Path, title: str, xlabel: str) -> None:
    """One bar per record (named by conversation, and turn where they differ): cached tokens green,
    computed orange, region boundaries marked."""
    fig, ax = plt.subplots(figsize=(11, 0.9 * len(rows) + 1.4))
    width = max(r.prompt_tokens for r in rows)
    for y, r in enumerate(rows):
        ax.barh(y, r.cached_tokens, color="#3a9d5d", height=0.55)
        ax.barh(y, r.computed_tokens, left=r.cached_tokens, color="#e8833a", height=0.55)
        for label, start, end in r.regions:
            ax.plot([start, start], [y - 0.32, y + 0.32], color="black", lw=0.6)
            if (end - start) / width > 0.05:
                ax.text((start + end) / 2, y + 0.33, label, ha="center", va="bottom", fontsize=6.5)
    same_turn = len({r.turn for r in rows}) == 1
    ax.set_yticks(
        range(len(rows)), [r.conversation if same_turn else f"{r.conversation} #{r.turn}" for r in rows]
    )
    ax.invert_yaxis()
    ax.set(xlabel=f"{xlabel} (green: from cache, orange: computed)", xlim=(0, width), title=title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_sweep(rows: Sequence[dict[str, Any]], path: Path, title: str) -> None:
    """Status-bar sweep: measured against predicted (append - replace) TTFT difference, one point per
    (S, R, N); bars: min-max over passes (measured) and over the repeats of alpha (predicted)."""
    fig, ax = plt.subplots(figsize=(10, 6))
    xs = [r["predicted_ms"] for r in rows] + [r["predicted_ms_min"] for r in rows]
    ys = [r["measured_ms"] for r in rows] + [r["measured_ms_min"] for r in rows]
    xs += [r["predicted_ms_max"] for r in rows]
    ys += [r["measured_ms_max"] for r in rows]
    colour = {n: f"C{i}" for i, n in enumerate(sorted({r["updates"] for r in rows}))}  # one per N
    labelled: set[int] = set()
    key = []  # each point numbered on the plot, named beside it: S R N labels on close points overprinted
    for i, row in enumerate(rows, 1):
        n = row["updates"]
        ax.errorbar(
            row["predicted_ms"],
            row["measured_ms"],
            xerr=_bars([row["predicted_ms"]], [row["predicted_ms_min"]], [row["predicted_ms_max"]]),
            yerr=_bars([row["measured_ms"]], [row["measured_ms_min"]], [row["measured_ms_max"]]),
            fmt="o",
            capsize=2,
            color=colour[n],
            label=None if n in labelled else f"N = {n} updates",
        )
        labelled.add(n)
        ax.annotate(
            str(i),
            (row["predicted_ms"], row["measured_ms"]),
            fontsize=7,
            xytext=(4, 3) if i % 2 else (-9, -10),  # neighbours' numbers on opposite sides
            textcoords="offset points",
        )
        key.append(f"{i:>2}  S {row['status_tokens']}, R {row['between_tokens']}, N {row['updates']}")
    lo, hi = min(xs + ys), max(xs + ys)
    ax.plot([lo, hi], [lo, hi], "k--", lw=0.8, label="measured = predicted")
    ax.axhline(0, color="grey", lw=0.6)
    ax.axvline(0, color="grey", lw=0.6)
    ax.set(
        xlabel="predicted append - replace (ms of TTFT, summed); bars: α's min–max",
        ylabel=f"measured append - replace (ms)\nmedian of {rows[0]['passes']} passes, bars min–max",
    )
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)
    ax.text(
        1.02,
        0.7,
        "\n".join(["points:", *key]),
        transform=ax.transAxes,
        va="top",
        fontsize=8,
        family="monospace",
    )
    ax.text(0.02, 0.98, "below 0: appending is cheaper", transform=ax.transAxes, va="top", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_rule_shares(
    records: Sequence[AnalyzedRequest], rules: Sequence[str], path: Path, title: str
) -> None:
    """Per cache rule: prompt tokens served from cache so far over prompt tokens so far, per request."""
    fig, ax = plt.subplots(figsize=(8, 4.5))
    x = range(1, len(records) + 1)
    prompt = list(itertools.accumulate(r.prompt_tokens for r in records))
    for rule in rules:
        cached = itertools.accumulate(r.served[rule].cached_tokens for r in records)
        ax.plot(x, [100 * c / p for c, p in zip(cached, prompt, strict=True)], marker="o", ms=3, label=rule)
    ax.set(xlabel="request (in the order sent)", ylabel="prompt tokens from cache so far (%)", ylim=(-3, 103))
    ax.set_title(title)
    _save(fig, path, ax)


def plot_pressure(points: Sequence[PressurePoint], path: Path, title: str) -> None:
    """Hit rate of the local cache against its capacity, one line per eviction policy."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for policy in dict.fromkeys(p.policy for p in points):
        mine = [p for p in points if p.policy == policy]
        ax.plot([p.cache_tokens for p in mine], [100 * p.hit_rate for p in mine], marker="o", label=policy)
    ax.set(xlabel="local cache capacity (tokens)", ylabel="prompt tokens from cache (%)", ylim=(-3, 103))
    # a long title (a session id, a trace's path) wraps instead of running off the figure
    ax.set_title(textwrap.fill(f"{title} (lines: eviction policies)", 72), fontsize=10)
    _save(fig, path, ax)
