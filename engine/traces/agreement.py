"""The provider's recorded usage beside each rule's prediction, and where the misses came from, summed
over a trace.

Per rule, over the requests whose recorded usage reports cache reads (and that have content):
`recorded_share` and `predicted_share` (cache reads over prompt tokens, each counted its own way: the
provider's tokenizer, the local one), `same_verdict` (the share of those requests that both call a miss,
or both do not: `engine.traces.miss_reasons`), `same_reason` (of the requests both call a miss, the share
given the same reason) and `median_share_gap` (the median of |recorded share - predicted share| per
request, in percentage points). The worst mismatches are the requests with the largest share gap under
the rule of the provider that recorded them.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from typing import Any

from engine.traces.analysis import RECORDED, AnalyzedRequest

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


def agreement(records: Sequence[AnalyzedRequest], rules: Sequence[str]) -> list[dict[str, Any]]:
    rows = []
    for rule in rules:
        both = [r for r in records if comparable(r, rule)]
        if not both:
            continue
        verdicts = [(r.misses[RECORDED], r.misses.get(rule)) for r in both]
        missed = [(a.reason, b.reason) for a, b in verdicts if a is not None and b is not None]
        gaps = [abs(r.recorded.cached_share - predicted_share(r, rule)) * 100 for r in both]
        rows.append(
            {
                "rule": rule,
                "requests": len(both),
                "recorded_share": sum(r.recorded.cache_read_tokens for r in both)
                / sum(r.recorded.prompt_tokens for r in both),
                "predicted_share": sum(r.served[rule].cached_tokens for r in both)
                / sum(r.served[rule].prompt_tokens or r.prompt_tokens for r in both),
                "same_verdict": sum((a is None) == (b is None) for a, b in verdicts) / len(verdicts),
                "same_reason": sum(a == b for a, b in missed) / len(missed) if missed else None,
                "median_share_gap": statistics.median(gaps),
            }
        )
    return rows


def worst_mismatches(
    records: Sequence[AnalyzedRequest], n: int = 5
) -> list[tuple[AnalyzedRequest, str, float]]:
    """(request, its provider's rule, the share gap in points), the largest gaps first."""
    found = []
    for r in records:
        rule = provider_rule(r)
        if rule is not None and comparable(r, rule):
            found.append((r, rule, (r.recorded.cached_share - predicted_share(r, rule)) * 100))
    return sorted(found, key=lambda x: abs(x[2]), reverse=True)[:n]


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
