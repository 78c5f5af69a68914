"""The timeline of a trace analysis, one figure per session: each request's cached share against the time
it was sent (minutes since the session's first request), recorded (the provider's usage) and predicted
(the local cache and the rule of the provider that recorded it; every rule where nothing was recorded),
idle gaps longer than 5 minutes (the shortest TTL of the hosted rules) shaded, and each miss of the
recorded usage (else of the local cache) labelled with its reason."""

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
        xs = [x for x, v in zip(minutes, values, strict=True) if v is not None]
        ys = [100 * v for v in values if v is not None]
        style = "-" if label == "recorded" else "--"
        ax.plot(xs, ys, style, marker="o", ms=3, label=label)
    cache, shares = (RECORDED, lines["recorded"]) if recorded else (LOCAL, lines["local (predicted)"])
    for x, share, r in zip(minutes, shares, records, strict=True):
        miss = r.misses.get(cache)
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
