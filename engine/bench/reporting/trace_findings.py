"""What report.md says beyond the tables: per provider's rule, the requests where the prediction disagrees
with the recording, and the recorded cache activity the trace's own requests cannot explain."""

from __future__ import annotations

from collections.abc import Sequence

from engine.bench.reporting.replay_report import table
from engine.traces.agreement import TOLERANCE, disagreements, provider_rule
from engine.traces.analysis import AnalyzedRequest

LISTED = 20  # disagreeing and unexplained requests listed; the rest counted
DISAGREEMENT_COLUMNS = [
    "conversation",
    "turn",
    "recorded_share",
    "predicted_share",
    "disagreement",
    "rule_says",
]


def provider_disagreements(records: Sequence[AnalyzedRequest]) -> list[str]:
    """Per provider's rule: the requests it disagrees with the recording on (the first `LISTED`)."""
    rules = list(dict.fromkeys(rule for r in records if (rule := provider_rule(r)) is not None))
    lines = [
        f"A prediction agrees when both read nothing, or both read and their shares are within "
        f"{TOLERANCE * 100:.0f} points of each other.",
        "",
    ]
    for rule in rules:
        rows = disagreements(records, rule)
        if not rows:
            lines.append(f"- `{rule}`: agrees with every recorded request")
            continue
        lines += [
            f"`{rule}` disagrees on {len(rows)} requests:",
            "",
            table(rows[:LISTED], DISAGREEMENT_COLUMNS),
        ]
        lines += (
            [f"- and {len(rows) - LISTED} more (agreement.csv has the totals)"] if len(rows) > LISTED else []
        )
    return (
        lines
        if rules
        else ["- none: the trace records no cache reads, or no request has a rule of its provider"]
    )


def unexplained_lines(records: Sequence[AnalyzedRequest]) -> list[str]:
    """The requests whose recorded reads exceed what the trace's earlier requests could have left, and
    those whose writes no later request read: counted, summed, the largest listed."""
    reads = [r for r in records if r.unexplained_read]
    writes = [r for r in records if r.unread_write]
    lines = [
        "Reads beyond what any earlier request of the trace (same model, still live) could have left: other "
        "calls wrote them (a parent agent, sibling subagents, another run, the parts the trace lacks). Writes "
        "no later request read while live: paid for and never used, as far as the trace shows.",
        "",
        f"- unexplained reads: {len(reads)} requests, {sum(r.unexplained_read for r in reads):,} tokens",
        f"- writes never read: {len(writes)} requests, {sum(r.unread_write for r in writes):,} tokens",
    ]
    rows = [
        {
            "conversation": r.conversation,
            "turn": r.turn,
            "unexplained_read": r.unexplained_read,
            "unread_write": r.unread_write,
        }
        for r in sorted({id(r): r for r in reads + writes}.values(), key=lambda r: (r.conversation, r.turn))
    ]
    if rows:
        lines += ["", table(rows[:LISTED], ["conversation", "turn", "unexplained_read", "unread_write"])]
        lines += [f"- and {len(rows) - LISTED} more (requests.csv)"] if len(rows) > LISTED else []
    return lines
