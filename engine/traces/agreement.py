"""The provider's recorded usage beside each rule's prediction, and where the misses came from, summed
over a trace.

A prediction agrees with a recording when both read nothing, or both read and their shares of the prompt
(cache reads over prompt tokens, each counted its own way: the provider's tokenizer, the local one) are
within `TOLERANCE` of each other. Otherwise it disagrees, for one of three reasons: the rule predicted
nothing where the provider recorded a read (with the rule's own `why_none`), predicted a read where the
provider recorded none, or both read but the shares differ by more than the tolerance.

Per rule, over the requests whose recorded usage reports cache reads (and that have content): the aggregate
`recorded_share` and `predicted_share`, `agree` (the share of requests that agree), `share_correlation`
(Pearson's r of the per-request shares; None where either is constant), `median_share_gap` and
`p90_share_gap` (|recorded share - predicted share| per request, in percentage points), `disagreements`,
and `same_reason` (of the requests both call a miss, `engine.traces.miss_reasons`, the share given the same
reason). `disagreements` lists each disagreeing request with both shares and the rule's reason.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Sequence
from typing import Any

from engine.traces.analysis import RECORDED, AnalyzedRequest

TOLERANCE = 0.10  # shares of the prompt within 10 points agree (tokenizers and hidden parts differ)
PREDICTED_NONE = "predicted nothing, recorded a read"
RECORDED_NONE = "predicted a read, recorded nothing"
SHARES_APART = "shares more than 10 points apart"
PROVIDER_RULE = {
    "anthropic": "anthropic",
    "openai": "openai",
    "deepseek": "deepseek",
    "gcp.gemini": "gemini",
    "kvtestbed": "local",  # engine.serve's --record: the engine's own cache
}


def provider_rule(record: AnalyzedRequest) -> str | None:
    """The rule of the provider that recorded a request's usage (None: unrecorded, or no such rule)."""
    return PROVIDER_RULE.get(record.recorded.provider) if record.recorded is not None else None


def predicted_share(record: AnalyzedRequest, rule: str) -> float | None:
    served = record.served.get(rule)
    if served is None:
        return None
    prompt = served.prompt_tokens or record.prompt_tokens
    return served.cached_tokens / prompt if prompt else None


def comparable(record: AnalyzedRequest, rule: str) -> bool:
    """Whether the request has both a recorded cache-read share and the rule's prediction."""
    usage = record.recorded
    return (
        RECORDED in record.misses
        and usage is not None
        and usage.cached_share is not None
        and rule in record.served
    )


def _verdict(recorded: float, predicted: float) -> str:
    """ "" where they agree, else why not."""
    if recorded == 0 and predicted == 0:
        return ""
    if predicted == 0:
        return PREDICTED_NONE
    if recorded == 0:
        return RECORDED_NONE
    return "" if abs(recorded - predicted) <= TOLERANCE else SHARES_APART


def _correlation(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    if len(xs) < 2 or len(set(xs)) < 2 or len(set(ys)) < 2:
        return None
    return statistics.correlation(xs, ys)


def _p90(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.9 * len(ordered)) - 1)]


def agreement(records: Sequence[AnalyzedRequest], rules: Sequence[str]) -> list[dict[str, Any]]:
    rows = []
    for rule in rules:
        both = [r for r in records if comparable(r, rule)]
        if not both:
            continue
        recorded = [r.recorded.cached_share for r in both]
        predicted = [predicted_share(r, rule) or 0.0 for r in both]
        verdicts = [_verdict(a, b) for a, b in zip(recorded, predicted, strict=True)]
        missed = [
            (r.misses[RECORDED].reason, r.misses[rule].reason)
            for r in both
            if r.misses[RECORDED] is not None and r.misses.get(rule) is not None
        ]
        gaps = [abs(a - b) * 100 for a, b in zip(recorded, predicted, strict=True)]
        rows.append(
            {
                "rule": rule,
                "requests": len(both),
                "recorded_share": sum(r.recorded.cache_read_tokens for r in both)
                / sum(r.recorded.prompt_tokens for r in both),
                "predicted_share": sum(r.served[rule].cached_tokens for r in both)
                / sum(r.served[rule].prompt_tokens or r.prompt_tokens for r in both),
                "agree": verdicts.count("") / len(verdicts),
                "share_correlation": _correlation(recorded, predicted),
                "median_share_gap": statistics.median(gaps),
                "p90_share_gap": _p90(gaps),
                "disagreements": len(verdicts) - verdicts.count(""),
                "same_reason": sum(a == b for a, b in missed) / len(missed) if missed else None,
            }
        )
    return rows


def disagreements(records: Sequence[AnalyzedRequest], rule: str) -> list[dict[str, Any]]:
    """The requests recorded by the provider of `rule` where it disagrees with the recording: both shares,
    why they disagree and the rule's reason (what it says of a read of nothing, else its miss reason)."""
    out = []
    for r in records:
        if provider_rule(r) != rule or not comparable(r, rule):
            continue
        recorded, predicted = r.recorded.cached_share, predicted_share(r, rule) or 0.0
        verdict = _verdict(recorded, predicted)
        if verdict:
            miss = r.misses.get(rule)
            out.append(
                {
                    "conversation": r.conversation,
                    "turn": r.turn,
                    "rule": rule,
                    "recorded_share": recorded,
                    "predicted_share": predicted,
                    "disagreement": verdict,
                    "rule_says": r.served[rule].why_none or (miss.reason if miss else ""),
                }
            )
    return out


def miss_summary(records: Sequence[AnalyzedRequest]) -> list[dict[str, Any]]:
    """Per cache (each rule, and the recorded usage) and reason: requests and the tokens the reason cost."""
    count: Counter[tuple[str, str]] = Counter()
    tokens: Counter[tuple[str, str]] = Counter()
    for r in records:
        for cache, miss in r.misses.items():
            if miss is not None:
                count[cache, miss.reason] += 1
                tokens[cache, miss.reason] += miss.missed_tokens
    caches = list(dict.fromkeys(c for r in records for c in r.misses))
    return [
        {
            "cache": cache,
            "reason": reason,
            "requests": count[cache, reason],
            "missed_tokens": tokens[cache, reason],
        }
        for cache in caches
        for reason in sorted({rs for c, rs in count if c == cache}, key=lambda x: -tokens[cache, x])
    ]
