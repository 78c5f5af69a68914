"""The timeline of a trace analysis, one figure per session: each request's cached share against the time
it was sent (minutes since the session's first request), recorded (the provider's usage) and predicted
(the local cache and the rule of the provider that recorded it; every rule where nothing was recorded),
idle gaps longer than 5 minutes (the shortest TTL of the hosted rules) shaded and never crossed by a line,
and each miss labelled with its reason: the recorded usage's, else a provider rule's (a TTL expiry is one),
else the local cache's."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from engine.bench.reporting.run_folder import slug  # noqa: E402
from engine.traces.agreement import predicted_share, provider_rule  # noqa: E402
from engine.traces.analysis import RECORDED, AnalyzedRequest  # noqa: E402
from engine.traces.providers.registry import LOCAL  # noqa: E402
from engine.traces.request import FIVE_MINUTES  # noqa: E402

MOST_SESSIONS = 20  # figures made, the sessions with the most requests first


def plot_timeline(records: Sequence[AnalyzedRequest], path: Path, title: str) -> None:
    t0 = records[0].time_s
    minutes = [(r.time_s - t0) / 60 for r in records]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for a, b in zip(records, records[1:], strict=False):
        if b.time_s - a.time_s > FIVE_MINUTES:
            ax.axvspan((a.time_s - t0) / 60, (b.time_s - t0) / 60, color="0.85", lw=0)
    lines = {"local (predicted)": [r.cached_share if r.prompt_tokens else None for r in records]}
    rule = next((provider_rule(r) for r in records if provider_rule(r)), None)
    rules = [rule] if rule is not None else [x for x in records[0].served if x != LOCAL]
    lines |= {f"{x} (predicted)": [predicted_share(r, x) for r in records] for x in rules}
    recorded = any(r.recorded is not None and r.recorded.cached_share is not None for r in records)
    if recorded:
        lines["recorded"] = [r.recorded.cached_share if r.recorded else None for r in records]
    for label, values in lines.items():
        xs: list[float] = []
        ys: list[float] = []
        for i, (x, v) in enumerate(zip(minutes, values, strict=True)):
            if i and records[i].time_s - records[i - 1].time_s > FIVE_MINUTES:
                xs, ys = [*xs, float("nan")], [*ys, float("nan")]  # no line across an idle gap
            if v is not None:
                xs, ys = [*xs, x], [*ys, 100 * v]
        style = "-" if label == "recorded" else "--"
        ax.plot(xs, ys, style, marker="o", ms=3, label=label)
    # each miss labelled once: the recorded one, else the provider rule's (a TTL expiry is a rule's miss,
    # never the local cache's), else the local cache's
    caches = [(RECORDED, "recorded")] if recorded else []
    caches += [(x, f"{x} (predicted)") for x in rules] + [(LOCAL, "local (predicted)")]
    for i, (x, r) in enumerate(zip(minutes, records, strict=True)):
        found = ((r.misses.get(c), lines[name][i]) for c, name in caches)
        miss, share = next(((m, s) for m, s in found if m is not None and s is not None), (None, None))
        if miss is not None and share is not None:
            ax.annotate(
                miss.reason,
                (x, 100 * share),
                fontsize=7,
                rotation=60,
                xytext=(3, 6),
                textcoords="offset points",
            )
    ax.set(xlabel="minutes since the session's first request", ylabel="prompt tokens from cache (%)")
    ax.set(ylim=(-3, 103))
    ax.set_title(f"{title} (shaded: idle > 5 min)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_timelines(records: Sequence[AnalyzedRequest], folder: Path) -> tuple[list[str], int]:
    """Figures `timeline-<session, slugged>.png` in `folder` for the MOST_SESSIONS sessions with the most
    requests; (their file names, how many sessions got none)."""
    sessions: dict[str, list[AnalyzedRequest]] = {}
    for r in records:
        sessions.setdefault(r.conversation, []).append(r)
    chosen = sorted(sessions, key=lambda s: -len(sessions[s]))[:MOST_SESSIONS]
    files: list[str] = []
    for session in chosen:
        name = f"timeline-{slug(session)}.png"
        if name in files:  # two sessions whose names differ only in characters a file name cannot hold
            name = f"timeline-{slug(session)}-{len(files)}.png"
        plot_timeline(sessions[session], folder / name, f"Cached share over time: {session}")
        files.append(name)
    return files, len(sessions) - len(chosen)
