"""Result files of a trace analysis: requests.csv (one row per request, a column group per rule),
rules.csv (per rule: cached share, writes, input cost), pressure.csv, analysis.json and report.md, which
names, for the requests that lost the most reuse, what changed (region and text)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine.bench.reporting.replay_report import markdown_text, table
from engine.bench.reporting.results import write_csv, write_json
from engine.traces.analysis import AnalyzedRequest
from engine.traces.pressure import PressurePoint

REQUEST_COLUMNS = [
    "conversation",
    "turn",
    "prompt_tokens",
    "cached_tokens",
    "cached_share",
    "change_region",
    "change_context",
]
WHY = "why_none"  # after the per-rule cached columns: which rules read nothing, and why
WORST = 5
PROXY_NOTE = (
    "Token counts use the local model's tokenizer: a proxy for each provider's own tokenizer. Costs "
    "are input costs in base-input-token equivalents (an uncached input token costs 1)."
)


def rule_summary(records: Sequence[AnalyzedRequest], rules: Sequence[str]) -> list[dict[str, Any]]:
    """Per rule over the whole trace: cached share of prompt tokens, tokens billed as writes, and the input
    cost against paying for every prompt token (None for the local engine, which has no price)."""
    prompt = sum(r.prompt_tokens for r in records)
    rows = []
    for rule in rules:
        served = [r.served[rule] for r in records]
        costs = [s.input_cost for s in served]
        cost = sum(c for c in costs if c is not None) if all(c is not None for c in costs) else None
        rows.append(
            {
                "rule": rule,
                "cached_share": sum(s.cached_tokens for s in served) / prompt,
                "written_tokens": sum(s.written_tokens for s in served),
                "input_cost": cost,
                "cost_vs_uncached": cost / prompt if cost is not None else None,
            }
        )
    return rows


def why_none(records: Sequence[AnalyzedRequest], rules: Sequence[str]) -> list[str]:
    """Per rule that read nothing on some requests: on how many, and why (each reason with its count)."""
    lines = []
    for rule in rules:
        reasons = Counter(r.served[rule].why_none for r in records if r.served[rule].why_none)
        if reasons:
            why = ", ".join(f"{reason} ({n})" for reason, n in reasons.most_common())
            lines.append(f"- `{rule}` read nothing on {reasons.total()} of {len(records)} requests: {why}")
    return lines


def worst(records: Sequence[AnalyzedRequest], n: int = WORST) -> list[AnalyzedRequest]:
    """The requests that lost the most reuse to a change: the most tokens of the previous request and its
    reply after the first change."""
    return sorted((r for r in records if r.lost_tokens > 0), key=lambda r: r.lost_tokens, reverse=True)[:n]


def write_trace_results(
    out: Path,
    title: str,
    env: dict[str, Any],
    records: Sequence[AnalyzedRequest],
    rules: Sequence[str],
    pressure: Sequence[PressurePoint],
    plots: Sequence[tuple[str, str]],
) -> None:
    rows, summary = [r.row() for r in records], rule_summary(records, rules)
    write_json(
        out / "analysis.json",
        {"environment": env, "rules": summary, "requests": rows, "pressure": [vars(p) for p in pressure]},
    )
    write_csv(out / "requests.csv", rows)
    write_csv(out / "rules.csv", summary)
    write_csv(out / "pressure.csv", [vars(p) for p in pressure])
    lines = [
        f"# {title}",
        "",
        f"- model (tokenizer and chat template): `{env['model']}`, block size {env['block_size']}, "
        f"local cache {env['cache_tokens']} tokens, context {env['context_tokens']:,} tokens"
        + (
            f" ({env['over_context_requests']} over it, which a full replay refuses: served nothing locally "
            "here)"
            if env.get("over_context_requests")
            else ""
        ),
        f"- commit `{env['commit']}`, {env['date']}",
        "",
        PROXY_NOTE,
        "",
        table(summary, ["rule", "cached_share", "written_tokens", "input_cost", "cost_vs_uncached"]),
        "",
        "## What changed where reuse was lost",
        "",
    ]
    bad = worst(records)
    lines += [
        f"- {r.conversation} request {r.turn}: {r.lost_tokens} tokens the previous request had cached, "
        "recomputed; "
        f"changed in `{r.change_region}` at token {r.first_change}: `{markdown_text(r.change_context)}`"
        for r in bad
    ]
    lines += [] if bad else ["- nothing: every request extends the previous one and its reply"]
    lines += why_none(records, rules)
    lines += [
        "",
        "## Per request",
        "",
        table(rows, REQUEST_COLUMNS + [f"{x}_cached" for x in rules if x != "local"] + [WHY]),
    ]
    if pressure:
        lines += [
            "",
            "## Local cache under pressure",
            "",
            table([vars(p) for p in pressure], ["policy", "cache_tokens", "hit_rate", "evictions"]),
        ]
    lines += ["", *(f"![{caption}]({file})\n" for file, caption in plots)]
    (out / "report.md").write_text("\n".join(lines) + "\n")
