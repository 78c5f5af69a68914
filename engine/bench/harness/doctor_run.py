"""`bench doctor`: the trace diagnosed, each cause's rewrite (and all of them together) measured through
the analysis without a model for every chosen cache rule, and with --measure through the engine (TTFT per
request, each rewrite paired with the original in one run)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.bench.harness.doctor_spans import PlacedSpan, place
from engine.bench.harness.trace_analysis import AnalysisSetup
from engine.bench.reporting.trace_report import rule_summary
from engine.traces.analysis import RECORDED, AnalyzedRequest, replies
from engine.traces.doctor.causes import TOOLS_AFTER
from engine.traces.doctor.diagnosis import CACHE_SIDE, Finding, findings, request_spans
from engine.traces.doctor.information import Kept, kept
from engine.traces.doctor.prescriptions import Prescription, no_rewrite, prescriptions, rewrite
from engine.traces.doctor.retention import is_copy
from engine.traces.providers import recorded
from engine.traces.request import TraceRequest

ORIGINAL, ALL = "original", "all fixes"


@dataclass
class Arm:
    """One version of the trace, measured: the original, one cause's rewrite, or all of them."""

    name: str
    requests: list[TraceRequest]
    records: list[AnalyzedRequest]
    rules: list[dict[str, Any]]  # rule_summary rows
    finding: Finding | None = None
    prescription: Prescription | None = None
    kept: Kept | None = None
    ttft: dict[str, Any] = field(default_factory=dict)  # summarize_turns' row, with --measure
    note: str = ""  # the rewrite's line for the report
    copies: list[AnalyzedRequest] = field(default_factory=list)  # keep-alive copies, paid but no request

    def rule(self, name: str) -> dict[str, Any]:
        return next(r for r in self.rules if r["rule"] == name)

    def computed(self, rule: str) -> int:
        """Prompt tokens the rule computed (not read from its cache), over the trace."""
        total = 0
        for r in [*self.records, *self.copies]:
            s = r.served.get(rule)
            if s is not None:
                total += (s.prompt_tokens or r.prompt_tokens) - s.cached_tokens
        return total


@dataclass
class Diagnosis:
    original: Arm
    spans: list[PlacedSpan]
    fixes: list[Arm]  # one per rewrite of each finding, the biggest gain first
    costs: list[Arm]  # what a cause that is not rewritten costs (the trace without it), per finding
    unfixed: list[tuple[Finding, str]]  # findings without a prescription, and why
    combined: Arm | None  # every finding's first rewrite together, where there are several
    applied: list[TraceRequest]  # the trace with every finding's first rewrite: what --apply writes


def cache_misses(records: Sequence[AnalyzedRequest], units: dict[str, int]) -> dict[int, str]:
    """Request index -> the first cache-side miss a cache gave it (`cache: reason`), where it cost more
    than one of that cache's units (`units`: a rule's; the recorded usage's by its provider): a read that
    rounds one unit short is the rule's granularity, not an expiry."""
    out = {}
    for i, r in enumerate(records):
        for cache, miss in r.misses.items():
            unit = (
                recorded.UNITS.get(r.recorded.provider, 1)
                if cache == RECORDED and r.recorded
                else units.get(cache, 1)
            )
            if miss is not None and miss.reason in CACHE_SIDE and miss.missed_tokens > unit:
                out[i] = f"{cache}: {miss.reason} ({miss.missed_tokens} tokens)"
                break
    return out


def measure(setup: AnalysisSetup, name: str, requests: list[TraceRequest]) -> Arm:
    """An arm's analysis; keep-alive copies are paid (input cost, computed tokens) but no request of the
    trace (cached shares and per-request records are the trace's own requests')."""
    records = setup.analyzer().run(requests)
    own = [r for r, q in zip(records, requests, strict=True) if not is_copy(q)]
    rules = rule_summary(own, setup.rules)
    if len(own) < len(records):
        for row, whole in zip(rules, rule_summary(records, setup.rules), strict=True):
            row["input_cost"], row["written_tokens"] = whole["input_cost"], whole["written_tokens"]
    copies = [r for r, q in zip(records, requests, strict=True) if is_copy(q)]
    return Arm(name, [q for q in requests if not is_copy(q)], own, rules, copies=copies)


def diagnose(setup: AnalysisSetup, requests: list[TraceRequest]) -> Diagnosis:
    original = measure(setup, ORIGINAL, requests)
    spans = request_spans(requests, replies(requests), cache_misses(original.records, setup.units()))
    placed = place(spans, requests, setup.renderer())
    extra = [p.span for p in placed if p.span.cause == TOOLS_AFTER]
    found = findings([p.span for p in placed])
    fixes, costs, unfixed = [], [], []
    current, steps, replaced = requests, 0, {}
    for f in found:
        options = prescriptions(f.cause, f.region)
        if not options:
            unfixed.append((f, no_rewrite(f.cause, f.region)))
        for rx in options:
            done = rewrite(requests, f.cause, f.region, extra, rx.rewrite)
            name = f"{f.cause} ({f.region})" + (f": {rx.rewrite}" if len(options) > 1 else "")
            arm = measure(setup, name, done.requests)
            arm.finding, arm.prescription, arm.kept, arm.note = f, rx, done.kept, done.note
            (fixes if rx.applied else costs).append(arm)
        if options and options[0].applied:
            own = extra if f.cause == TOOLS_AFTER else ()
            step = rewrite(current, f.cause, f.region, own, options[0].rewrite)
            current, steps = step.requests, steps + 1
            replaced |= step.replaced
    fixes.sort(key=lambda a: a.computed("local"))
    combined = None
    if steps > 1:
        combined = measure(setup, ALL, current)
        combined.kept = kept(requests, current, replaced)
    return Diagnosis(original, placed, fixes, costs, unfixed, combined, current)
