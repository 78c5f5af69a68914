"""Result files of a trace analysis: requests.csv (one row per request: recorded usage, a column group
per rule, the miss reason per cache), rules.csv (per rule: cached share, writes, input cost),
agreement.csv (recorded against predicted, per rule), misses.csv (per cache and reason), pressure.csv,
analysis.json and report.md, which also names, for the requests that lost the most reuse, what changed
(region and text), and for each rule that read nothing on some requests, why (`why_none`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine.bench.reporting.replay_report import markdown_text, table
from engine.bench.reporting.results import provenance, write_csv, write_json
from engine.bench.reporting.trace_findings import provider_disagreements, unexplained_lines
from engine.traces.agreement import agreement, miss_summary, predicted_share, provider_rule
from engine.traces.analysis import RECORDED, AnalyzedRequest
from engine.traces.pressure import PressurePoint

REQUEST_COLUMNS = [
    "conversation",
    "turn",
    "prompt_tokens",
    "cached_tokens",
    "cached_share",
    "local_miss",
    "change_region",
    "change_context",
]
WHY = "why_none"  # after the per-rule cached columns: which rules read nothing, and why
RECORDED_COLUMNS = [
    "conversation",
    "turn",
    "gap_s",
    "recorded_prompt",
    "recorded_read",
    "recorded_write",
    "write_5m/1h",
    "recorded_share",
    "rule",
    "predicted_share",
    "recorded_miss",
    "predicted_miss",
]
RULE_COLUMNS = ["rule", "cached_share", "written_tokens", "input_cost", "cost_vs_uncached"]
AGREEMENT_COLUMNS = [
    "rule",
    "requests",
    "recorded_share",
    "predicted_share",
    "agree",
    "share_correlation",
    "median_share_gap",
    "p90_share_gap",
    "disagreements",
    "same_reason",
]
MISS_COLUMNS = ["cache", "reason", "requests", "missed_tokens"]
WORST = 5
NOT_REPORTED = "not reported"
PROXY_NOTE = (
    "Token counts use the local model's tokenizer: a proxy for each provider's own tokenizer. Costs "
    "are input costs in base-input-token equivalents (an uncached input token costs 1). Recorded figures "
    "are the provider's own counts (its tokenizer): compare shares, not token counts."
)


def rule_summary(records: Sequence[AnalyzedRequest], rules: Sequence[str]) -> list[dict[str, Any]]:
    """Per rule over the requests it served: cached share of prompt tokens (as it counts them), tokens
    billed as writes, and the input cost against paying for every prompt token (None for the local
    engine, which has no price)."""
    rows = []
    for rule in rules:
        pairs = [(r, r.served[rule]) for r in records if rule in r.served]
        prompt = sum(s.prompt_tokens or r.prompt_tokens for r, s in pairs)
        costs = [s.input_cost for _, s in pairs]
        cost = sum(c for c in costs if c is not None) if all(c is not None for c in costs) else None
        rows.append(
            {
                "rule": rule,
                "cached_share": sum(s.cached_tokens for _, s in pairs) / prompt if prompt else None,
                "written_tokens": sum(s.written_tokens for _, s in pairs),
                "input_cost": cost,
                "cost_vs_uncached": cost / prompt if cost is not None and prompt else None,
            }
        )
    return rows


def why_none(records: Sequence[AnalyzedRequest], rules: Sequence[str]) -> list[str]:
    """Per rule that read nothing on some requests: on how many, and why (each reason with its count)."""
    lines = []
    for rule in rules:
        served = [r.served[rule] for r in records if rule in r.served]  # usage-only requests have none
        reasons = Counter(s.why_none for s in served if s.why_none)
        if reasons:
            why = ", ".join(f"{reason} ({n})" for reason, n in reasons.most_common())
            lines.append(f"- `{rule}` read nothing on {reasons.total()} of {len(served)} requests: {why}")
    return lines


def recorded_rows(records: Sequence[AnalyzedRequest]) -> list[dict[str, Any]]:
    """Per request with recorded usage: what the provider reported beside its rule's prediction (a count
    the provider did not report shows as "not reported")."""
    rows = []
    for r in records:
        if r.recorded is None:
            continue
        u, rule = r.recorded, provider_rule(r)

        def shown(value: Any) -> Any:
            return NOT_REPORTED if value is None else value

        split = (
            f"{u.cache_write_5m_tokens}/{u.cache_write_1h_tokens}"
            if u.cache_write_5m_tokens is not None or u.cache_write_1h_tokens is not None
            else NOT_REPORTED
        )
        miss, predicted = r.misses.get(RECORDED), r.misses.get(rule) if rule else None
        rows.append(
            {
                "conversation": r.conversation,
                "turn": r.turn,
                "gap_s": r.gap_s,
                "recorded_prompt": shown(u.prompt_tokens),
                "recorded_read": shown(u.cache_read_tokens),
                "recorded_write": shown(u.cache_write_tokens),
                "write_5m/1h": split,
                "recorded_share": shown(u.cached_share),
                "rule": rule,
                "predicted_share": predicted_share(r, rule) if rule else None,
                "recorded_miss": miss.reason if miss else (None if RECORDED in r.misses else NOT_REPORTED),
                "predicted_miss": predicted.reason if predicted else None,
            }
        )
    return rows


def messages_only(records: Sequence[AnalyzedRequest]) -> list[str]:
    """The banner every table gets when the trace lacks part of the prompts."""
    parts = sorted({p for r in records for p in r.missing if p in ("system", "tools")})
    if not parts:
        return []
    flags = " / ".join(f"--{p}-file" for p in parts)
    return [
        f"**messages only**: the trace holds no {' or '.join(parts)} ({flags} supply them); every figure here "
        "counts what the trace holds."
    ]


def worst(records: Sequence[AnalyzedRequest], n: int = WORST) -> list[AnalyzedRequest]:
    """The requests that lost the most reuse to a change: the most tokens of the previous request and its
    reply after the first change."""
    return sorted((r for r in records if r.lost_tokens > 0), key=lambda r: r.lost_tokens, reverse=True)[:n]


def summary_tables(records: Sequence[AnalyzedRequest], rules: Sequence[str]) -> list[str]:
    """What the command prints and the report opens with: the banner, recorded against predicted, the
    agreement per rule and the miss reasons."""
    out = messages_only(records)
    recorded = recorded_rows(records)
    agreed = agreement(records, rules)
    if recorded:
        out += ["", "Recorded (provider) beside predicted (its rule):", table(recorded, RECORDED_COLUMNS)]
    if agreed:
        out += ["", "Agreement per rule:", table(agreed, AGREEMENT_COLUMNS)]
    out += ["", "Where the misses came from:", table(miss_summary(records), MISS_COLUMNS)]
    return out


def write_trace_results(
    out: Path,
    title: str,
    env: dict[str, Any],
    records: Sequence[AnalyzedRequest],
    rules: Sequence[str],
    pressure: Sequence[PressurePoint],
    plots: Sequence[tuple[str, str]],
    notes: Sequence[str] = (),
) -> None:
    rows, summary = [r.row() for r in records], rule_summary(records, rules)
    agreed, misses = agreement(records, rules), miss_summary(records)
    everything = {"environment": env, "notes": list(notes), "rules": summary, "agreement": agreed}
    everything |= {"misses": misses, "requests": rows, "pressure": [vars(p) for p in pressure]}
    write_json(out / "analysis.json", everything)
    write_csv(out / "requests.csv", rows)
    write_csv(out / "rules.csv", summary)
    write_csv(out / "agreement.csv", agreed)
    write_csv(out / "misses.csv", misses)
    write_csv(out / "pressure.csv", [vars(p) for p in pressure])
    lines = [
        f"# {title}",
        "",
        *provenance(env),
        f"- model (tokenizer and chat template): `{env['model']}`, block size {env['block_size']}, "
        f"local cache {env['cache_tokens']} tokens, context {env['context_tokens']:,} tokens"
        + (
            f" ({env['over_context_requests']} over it, which a full replay refuses: served nothing locally "
            "here)"
            if env.get("over_context_requests")
            else ""
        )
        + (
            f"; {env['over_cache_requests']} need more than the local cache holds, which a full replay "
            "refuses: served nothing locally here"
            if env.get("over_cache_requests")
            else ""
        ),
        *(f"- {note}" for note in notes),
        "",
        PROXY_NOTE,
        "",
        table(summary, RULE_COLUMNS),
        "",
        *summary_tables(records, rules),
        "",
        "## Disagreements, recorded against predicted (the provider's own rule)",
        "",
    ]
    lines += provider_disagreements(records)
    lines += ["", "## Cache activity the trace cannot explain", "", *unexplained_lines(records)]
    lines += ["", "## What changed where reuse was lost", ""]
    lines += [
        f"- {r.conversation} request {r.turn}: {r.lost_tokens} tokens the previous request had cached, "
        f"recomputed; changed in `{r.change_region}` at token {r.first_change}"
        + (f" ({r.change_cause})" if r.change_cause else "")
        + ": "
        f"`{markdown_text(r.change_context)}`"
        for r in worst(records)
    ] or ["- nothing: every request extends the previous one and its reply"]
    lines += why_none(records, rules)
    columns = REQUEST_COLUMNS + [f"{x}_cached" for x in rules if x != "local"] + [WHY]
    lines += ["", "## Per request", "", *messages_only(records), table(rows, columns)]
    if pressure:
        lines += ["", "## Local cache under pressure", ""]
        lines += [table([vars(p) for p in pressure], ["policy", "cache_tokens", "hit_rate", "evictions"])]
    lines += ["", *(f"![{caption}]({file})\n" for file, caption in plots)]
    (out / "report.md").write_text("\n".join(lines) + "\n")
