"""What `bench doctor` writes: `report.md` (the biggest fixes first, each with its evidence: the two
renderings at the break), `causes.csv` (one row per cause), `spans.csv` (one row per span), and the plot
of the cached share per request before and after each fix."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from engine.bench.harness.doctor_run import Arm, Diagnosis  # noqa: E402
from engine.bench.reporting.replay_report import markdown_text, table  # noqa: E402
from engine.bench.reporting.results import provenance, write_csv, write_json  # noqa: E402
from engine.traces.doctor.prescriptions import WHAT  # noqa: E402
from engine.traces.providers.registry import LOCAL  # noqa: E402

SHOWN = 120  # characters of each side of a span in report.md
CAUSE_COLUMNS = ["cause", "region", "requests", "rewrite", "cached_share_before", "cached_share_after"]
CAUSE_COLUMNS += [
    "computed_tokens_before",
    "computed_tokens_after",
    "prompt_tokens_before",
    "prompt_tokens_after",
]


def span_rows(d: Diagnosis, requests: Sequence[Any]) -> list[dict[str, Any]]:
    return [
        {
            "request": p.span.request + 1,
            "session": requests[p.span.request].session,
            "compared_with": p.span.compared + 1,
            "cause": p.span.cause,
            "region": p.span.region,
            "char": p.span.char if p.span.char >= 0 else None,
            "token": p.token,
            "before": p.span.before,
            "after": p.span.after,
        }
        for p in d.spans
    ]


def _share(arm: Arm, rule: str) -> float | None:
    return arm.rule(rule)["cached_share"]


def broken_share(arm: Arm, requests: Sequence[int], rule: str = LOCAL) -> float | None:
    """The rule's cached share over the requests a cause broke (trace indices)."""
    served = [(arm.records[i], arm.records[i].served.get(rule)) for i in requests]
    prompt = sum(s.prompt_tokens or r.prompt_tokens for r, s in served if s is not None)
    return sum(s.cached_tokens for _, s in served if s is not None) / prompt if prompt else None


def cause_rows(d: Diagnosis, rules: Sequence[str]) -> list[dict[str, Any]]:
    """One row per cause: the local engine's figures unprefixed, each hosted rule's prefixed by its name."""
    rows = []
    for arm in [*d.fixes, *d.costs, *([d.combined] if d.combined else [])]:
        f = arm.finding
        row: dict[str, Any] = {
            "cause": f.cause if f else arm.name,
            "region": f.region if f else "",
            "requests": len(f.requests) if f else len({s.span.request for s in d.spans}),
            "rewrite": arm.prescription.rewrite if arm.prescription else "all",
            "cannot_keep": arm.prescription.cannot_keep if arm.prescription else "",
            "lines_missing": arm.kept.missing if arm.kept else None,
            "lines_added": arm.kept.added if arm.kept else None,
        }
        for rule in rules:
            prefix = "" if rule == LOCAL else f"{rule}_"
            row[f"{prefix}cached_share_before"] = _share(d.original, rule)
            row[f"{prefix}cached_share_after"] = _share(arm, rule)
            row[f"{prefix}computed_tokens_before"] = d.original.computed(rule)
            row[f"{prefix}computed_tokens_after"] = arm.computed(rule)
            if rule == LOCAL:  # what a rewrite that keeps more (a dropped history) costs in prompt length
                row["prompt_tokens_before"] = sum(r.prompt_tokens for r in d.original.records)
                row["prompt_tokens_after"] = sum(r.prompt_tokens for r in arm.records)
                broke = f.requests if f else sorted({s.span.request for s in d.spans})
                row["broken_share_before"] = broken_share(d.original, broke)
                row["broken_share_after"] = broken_share(arm, broke)
            if rule != LOCAL:
                row[f"{rule}_cost_before"] = d.original.rule(rule)["input_cost"]
                row[f"{rule}_cost_after"] = arm.rule(rule)["input_cost"]
        if arm.ttft:
            row |= {k: arm.ttft.get(k) for k in ("ttft_ratio", "ttft_ratio_min", "ttft_ratio_max", "p")}
        rows.append(row)
    for f, why in d.unfixed:
        rows.append(
            {
                "cause": f.cause,
                "region": f.region,
                "requests": len(f.requests),
                "rewrite": "",
                "cannot_keep": why,
            }
        )
    return rows


def _gain(d: Diagnosis, arm: Arm, rule: str) -> str:
    before, after = _share(d.original, rule), _share(arm, rule)
    if before is None or after is None:
        return f"{rule}: no prompt served"
    text = f"{rule}: cached {before:.0%} → {after:.0%}"
    if rule != LOCAL:
        cb, ca = d.original.rule(rule)["input_cost"], arm.rule(rule)["input_cost"]
        if cb and ca is not None:
            text += f", input cost {ca / cb - 1:+.0%}"
    else:
        broke = arm.finding.requests if arm.finding else sorted({s.span.request for s in d.spans})
        b, a = broken_share(d.original, broke), broken_share(arm, broke)
        text += f" (on the requests it broke: {b:.0%} → {a:.0%})" if b is not None and a is not None else ""
        text += f", computed tokens {d.original.computed(rule):,} → {arm.computed(rule):,}"
        before_p, after_p = (sum(r.prompt_tokens for r in a.records) for a in (d.original, arm))
        text += f", prompt tokens {before_p:,} → {after_p:,}" if after_p != before_p else ""
    return text


def _ttft(arm: Arm) -> str:
    t = arm.ttft
    if not t or t.get("ttft_ratio") is None:
        return ""
    return (
        f"; TTFT {t['ttft_ratio']:.2f}× the original's [{t['ttft_ratio_min']:.2f}–{t['ttft_ratio_max']:.2f}]"
    )


def evidence(d: Diagnosis, arm_or_finding: Any, requests: Sequence[Any]) -> list[str]:
    """The first span of a finding: both renderings side by side."""
    f = arm_or_finding
    s = f.spans[0]
    token = next((p.token for p in d.spans if p.span == s), None)
    at = f" at token {token}" if token is not None else ""
    record = d.original.records[s.request]
    rendered = (
        [
            f"    rendered at its first change (token {record.first_change}): `{markdown_text(record.change_context)}`"
        ]
        if record.first_change >= 0
        else []
    )
    return [
        f"  - request {s.request + 1} against request {s.compared + 1}, `{s.region}`{at}:",
        f"    before `{markdown_text(s.before[:SHOWN])}` → after `{markdown_text(s.after[:SHOWN])}`",
        *rendered,
    ]


def write_doctor_results(
    out: Path, title: str, env: dict[str, Any], d: Diagnosis, rules: Sequence[str], requests: Sequence[Any]
) -> None:
    spans, causes = span_rows(d, requests), cause_rows(d, rules)
    write_csv(out / "spans.csv", spans)
    write_csv(out / "causes.csv", causes)
    write_json(out / "doctor.json", {"environment": env, "causes": causes, "spans": spans})
    plot_shares(d, out / "cached_share.png", f"Local cached share per request: {title}")
    lines = [f"# {title}", "", *provenance(env), ""]
    if not d.fixes and not d.costs and not d.unfixed:
        lines += ["No request broke its prefix: every request extends the one it continues.", ""]
    for n, arm in enumerate(d.fixes, 1):
        f, rx = arm.finding, arm.prescription
        lines += [
            f"## {n}. {f.cause} in the {f.region}: {len(f.requests)} requests",
            "",
            f"- fix: {rx.rewrite} ({WHAT[rx.rewrite]}); "
            + "; ".join(_gain(d, arm, r) for r in rules)
            + _ttft(arm),
            f"- information: {arm.kept.missing} lines lost, {arm.kept.added} added"
            + (f", {arm.kept.named} named below" if arm.kept.named else "")
            + (f"; cannot keep: {rx.cannot_keep}" if rx.cannot_keep else ""),
            *([f"- {arm.note}"] if arm.note else []),
            "- evidence:",
            *evidence(d, f, requests),
            "",
        ]
    for arm in d.costs:
        f, rx = arm.finding, arm.prescription
        lines += [
            f"## {f.cause} in the {f.region}: {len(f.requests)} requests, not rewritten",
            "",
            f"- {rx.cannot_keep}",
            "- what it costs (the trace without it): "
            + "; ".join(_gain(d, arm, r) for r in rules)
            + _ttft(arm),
            "- evidence:",
            *evidence(d, f, requests),
            "",
        ]
    if d.combined:
        lines += [
            "## All fixes together",
            "",
            "- " + "; ".join(_gain(d, d.combined, r) for r in rules) + _ttft(d.combined),
            "",
        ]
    for f, why in d.unfixed:
        lines += [
            f"## {f.cause} in the {f.region}: {len(f.requests)} requests",
            "",
            f"- {why}",
            "- evidence:",
            *evidence(d, f, requests),
            "",
        ]
    lines += [
        "## Causes",
        "",
        table(causes, CAUSE_COLUMNS),
        "",
        "![cached share per request](cached_share.png)",
        "",
    ]
    (out / "report.md").write_text("\n".join(lines) + "\n")


def plot_shares(d: Diagnosis, path: Path, title: str) -> None:
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for arm in [d.original, *d.fixes, *d.costs, *([d.combined] if d.combined else [])]:
        shares = [r.cached_share for r in arm.records]
        style = {"color": "black", "lw": 2} if arm is d.original else {"lw": 1.2}
        ax.plot(range(1, len(shares) + 1), shares, marker=".", label=arm.name, **style)
    ax.set_xlabel("request")
    ax.set_ylabel("cached share (local engine)")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
