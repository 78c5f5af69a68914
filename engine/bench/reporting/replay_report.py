"""Summaries and result files of a replay (turns.json / turns.csv / summary.csv / report.md), and the
plain-text summary table every command prints."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from engine.bench.harness.replayer import TurnRecord
from engine.bench.reporting.results import provenance, write_csv, write_json
from engine.bench.reporting.stats import pass_ratios, per_pass, spread, verdict

TTFT_MEANS = (
    "TTFT is arrival to the first sampled token (block lookup, prefill, first sample; device-synchronized); "
    "rendering the chat template and tokenizing are excluded (recorded apart as `render_s`, `tokenize_s`)."
)
SUMMARY_COLUMNS = [
    "conversation",
    "passes",
    "ttft_ms",
    "ttft_ratio",
    "vs_baseline",
    "cold_ttft_ms",
    "total_ttft_s",
    "cached_share",
    "computed_tokens",
    "prompt_tokens",
    "reuse_ends_in",
]


def _with_spread(row: dict[str, Any], key: str, values: Sequence[float], scale: float = 1.0) -> None:
    """row[key] = median of `values` (times `scale`), with row[key_min] and row[key_max]."""
    s = spread(values)
    row |= {key: scale * s["median"], f"{key}_min": scale * s["min"], f"{key}_max": scale * s["max"]}


PARTIAL_NOTE = "**Partial run**: interrupted (Ctrl-C); only what finished before it is recorded."
# Characters that would break a markdown table row or a code span, shown visibly instead.
MARKDOWN_ESCAPES = str.maketrans({"\\": "\\\\", "|": "\\|", "`": "\\`", "\n": "⏎", "\r": "␍", "\t": "⇥"})


def summarize_turns(records: Sequence[TurnRecord], baseline: str) -> list[dict[str, Any]]:
    """Per conversation: its TTFT over turns 2+ (turn 1 is a cold start for everyone) as one value per
    pass (the median over those turns), given as the median over passes with min-max; the ratio of that
    median to the baseline's with the min-max of the per-pass ratios; `vs_baseline` says whether the two
    min-max ranges are apart ('lower' / 'higher') or overlap ('within noise'). Summed TTFT over all turns
    per pass likewise; cached share over turns 2+; computed and prompt tokens over all turns.
    `cold_ttft_ms` is None when the replay measured no cold baseline."""
    groups: dict[str, list[TurnRecord]] = {}
    for r in records:
        groups.setdefault(r.conversation, []).append(r)

    def later(rs: list[TurnRecord]) -> list[TurnRecord]:
        return [r for r in rs if r.turn > 1] or rs

    passes = {name: per_pass([r.ttft_passes_s for r in later(rs)]) for name, rs in groups.items()}
    rows = []
    for name, rs in groups.items():
        row: dict[str, Any] = {"conversation": name, "passes": len(passes[name])}
        _with_spread(row, "ttft_ms", passes[name], 1000)
        if baseline in passes:
            ratios = pass_ratios(passes[name], passes[baseline])
            row["ttft_ratio"] = row["ttft_ms"] / (1000 * spread(passes[baseline])["median"])
            row["ttft_ratio_min"], row["ttft_ratio_max"] = min(ratios), max(ratios)
            row["vs_baseline"] = "baseline" if name == baseline else verdict(passes[name], passes[baseline])
        if all(r.cold_ttft_passes_s for r in later(rs)):
            _with_spread(row, "cold_ttft_ms", per_pass([r.cold_ttft_passes_s for r in later(rs)]), 1000)
        else:
            row["cold_ttft_ms"] = None
        _with_spread(row, "total_ttft_s", per_pass([r.ttft_passes_s for r in rs], sum))
        row |= {
            "cached_share": sum(r.cached_tokens for r in later(rs)) / sum(r.prompt_tokens for r in later(rs)),
            "computed_tokens": sum(r.computed_tokens for r in rs),
            "prompt_tokens": sum(r.prompt_tokens for r in rs),
            "reuse_ends_in": rs[-1].divergence_region,
        }
        rows.append(row)
    return rows


def spread_notes(summary: Sequence[dict[str, Any]]) -> list[str]:
    """What the spreads mean, and which conversations differ from the baseline by more than their spread."""
    baseline = next((r["conversation"] for r in summary if r.get("vs_baseline") == "baseline"), None)
    if baseline is None:
        return []
    apart = [
        f"`{r['conversation']}` ({r['vs_baseline']})"
        for r in summary
        if r.get("vs_baseline") in ("lower", "higher")
    ]
    noise = [f"`{r['conversation']}`" for r in summary if r.get("vs_baseline") == "within noise"]
    return [
        "Spread: `x [a–b]` is the median over passes with the min–max over passes (n = `passes`); per pass a "
        "conversation's TTFT is its median over turns 2+. `ttft_ratio` is the ratio of medians to "
        f"`{baseline}` with the min–max of the per-pass ratios (both arms measured in the same pass).",
        "TTFT differs from the baseline by more than the spread (min–max ranges apart): "
        + (", ".join(apart) if apart else "none")
        + ("; within noise (ranges overlap): " + ", ".join(noise) if noise else "")
        + ".",
    ]


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
        *provenance(env),
        *([PARTIAL_NOTE, ""] if env.get("partial") else []),
        f"- model: `{env['model']}` ({env['source']}, {weights}), digest `{env['weights_digest'][:16]}`",
        f"- device: {env['device']} ({env['device_name']}), dtype {env['dtype']}, "
        f"block size {env['block_size']}",
        f"- torch {env['torch']}, transformers {env['transformers']}",
        f"- repeats: {env['options'].get('repeats')} passes; {TTFT_MEANS}",
        "",
        table(summary, SUMMARY_COLUMNS),
        "",
        *spread_notes(summary),
        "",
        *notes,
        "",
        *(f"![{caption}]({file})\n" for file, caption in plots),
    ]
    (out / "report.md").write_text("\n".join(lines) + "\n")


def table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    """A plain-text table (also valid markdown) of the given columns. A column whose rows carry `<c>_min`
    and `<c>_max` shows `median [min–max]` and says so in its header."""
    ranged = [any(f"{c}_min" in row and f"{c}_max" in row for row in rows) for c in columns]
    cells = [[_cell(row, c) for c in columns] for row in rows]
    columns = [f"{c} [min–max]" if r else c for c, r in zip(columns, ranged, strict=True)]
    widths = [max(len(c), *(len(r[i]) for r in cells)) if cells else len(c) for i, c in enumerate(columns)]

    def line(items: Sequence[str]) -> str:
        return "| " + " | ".join(s.ljust(w) for s, w in zip(items, widths, strict=True)) + " |"

    return "\n".join([line(columns), line(["-" * w for w in widths]), *(line(r) for r in cells)])


def _cell(row: dict[str, Any], column: str) -> str:
    value = _fmt(row.get(column, ""))
    if row.get(f"{column}_min") is None or row.get(f"{column}_max") is None:
        return value
    return f"{value} [{_fmt(row[f'{column}_min'])}–{_fmt(row[f'{column}_max'])}]"


def markdown_text(text: str) -> str:
    """`text` on one line, safe in a markdown table cell or list item: newlines, tabs and carriage returns
    shown as ⏎ ⇥ ␍; pipes, backticks and backslashes escaped."""
    return text.translate(MARKDOWN_ESCAPES)


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 100 else f"{value:.0f}"
    return markdown_text(str(value))
