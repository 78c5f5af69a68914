"""Summaries and result files of a replay (turns.json / turns.csv / summary.csv / report.md), and the
plain-text summary table every command prints."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from engine.bench.machinery.replayer import TurnRecord
from engine.bench.machinery.results import write_csv, write_json

SUMMARY_COLUMNS = [
    "conversation",
    "ttft_ms",
    "ttft_ratio",
    "cold_ttft_ms",
    "total_ttft_s",
    "cached_share",
    "computed_tokens",
    "prompt_tokens",
    "reuse_ends_in",
]


def summarize(records: Sequence[TurnRecord], baseline: str) -> list[dict[str, Any]]:
    """Per conversation, over turns 2+ (turn 1 is a cold start for everyone): median TTFT, its ratio to
    the baseline's, cached share of prompt tokens; TTFT, computed and prompt tokens summed over all turns.
    `cold_ttft_ms` is None when the replay measured no cold baseline."""
    groups: dict[str, list[TurnRecord]] = {}
    for r in records:
        groups.setdefault(r.conversation, []).append(r)
    rows = []
    for name, rs in groups.items():
        later = [r for r in rs if r.turn > 1] or rs
        cold = 1000 * statistics.median(r.cold_ttft_s for r in later) if later[0].cold_ttft_s else None
        rows.append(
            {
                "conversation": name,
                "ttft_ms": 1000 * statistics.median(r.ttft_s for r in later),
                "cold_ttft_ms": cold,
                "total_ttft_s": sum(r.ttft_s for r in rs),
                "cached_share": sum(r.cached_tokens for r in later) / sum(r.prompt_tokens for r in later),
                "computed_tokens": sum(r.computed_tokens for r in rs),
                "prompt_tokens": sum(r.prompt_tokens for r in rs),
                "reuse_ends_in": rs[-1].divergence_region,
            }
        )
    base = next((row["ttft_ms"] for row in rows if row["conversation"] == baseline), None)
    for row in rows:
        row["ttft_ratio"] = row["ttft_ms"] / base if base else float("nan")
    return rows


def write_results(
    out: Path,
    title: str,
    env: dict[str, Any],
    records: Sequence[TurnRecord],
    summary: Sequence[dict[str, Any]],
    notes: Sequence[str] = (),
    plots: Sequence[tuple[str, str]] = (),
    extra: dict[str, Any] | None = None,
) -> None:
    """JSON (everything), CSV (turns, summary) and a short markdown report with the plots."""
    everything = {"environment": env, "summary": list(summary), "turns": [asdict(r) for r in records]}
    write_json(out / "turns.json", everything | (extra or {}))
    write_csv(out / "turns.csv", [r.row() for r in records])
    write_csv(out / "summary.csv", list(summary))
    weights = "synthetic random weights (timings only)" if env.get("synthetic_weights") else "trained weights"
    lines = [
        f"# {title}",
        "",
        f"- model: `{env['model']}` ({env['source']}, {weights}), digest `{env['weights_digest'][:16]}`",
        f"- device: {env['device']} ({env['device_name']}), dtype {env['dtype']}, "
        f"block size {env['block_size']}",
        f"- torch {env['torch']}, transformers {env['transformers']}, "
        f"commit `{env['commit']}`, {env['date']}",
        f"- repeats: {env['options'].get('repeats')} passes; TTFT is the median, device-synchronized",
        "",
        table(summary, SUMMARY_COLUMNS),
        "",
        *notes,
        "",
        *(f"![{caption}]({file})\n" for file, caption in plots),
    ]
    (out / "report.md").write_text("\n".join(lines) + "\n")


def table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    """A plain-text table (also valid markdown) of the given columns."""
    cells = [[_fmt(row.get(c, "")) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) if cells else len(c) for i, c in enumerate(columns)]

    def line(items: Sequence[str]) -> str:
        return "| " + " | ".join(s.ljust(w) for s, w in zip(items, widths, strict=True)) + " |"

    return "\n".join([line(columns), line(["-" * w for w in widths]), *(line(r) for r in cells)])


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 100 else f"{value:.0f}"
    return one_line(str(value))


def one_line(text: str) -> str:
    """Text for a table row or a list item: line breaks (prompt text often has them) shown as ↵."""
    return text.replace("\n", "↵")
