"""OpenAI's rule: nothing under 1,024 tokens, hits in 128-token increments, 5-minute retention, read price."""

from __future__ import annotations

import pytest

from engine.traces.providers.base import RulePrompt
from engine.traces.providers.openai import OpenAIRule


def twice(n: int, gap_s: float = 1.0, model: str | None = None):
    rule, ids = OpenAIRule(), list(range(n))
    first = rule.serve(RulePrompt(ids, 0.0, model))
    return first, rule.serve(RulePrompt(ids + [7], gap_s, model))


@pytest.mark.parametrize(
    ("tokens", "cached"), [(1023, 0), (1024, 1024), (1151, 1024), (1152, 1152), (1280, 1280)]
)
def test_minimum_and_increments(tokens: int, cached: int) -> None:
    first, second = twice(tokens)
    assert first.cached_tokens == 0 and second.cached_tokens == cached


def test_retention_expires_after_five_idle_minutes() -> None:
    assert twice(2048, gap_s=300.0)[1].cached_tokens == 2048
    assert twice(2048, gap_s=301.0)[1].cached_tokens == 0


def test_a_changed_token_stops_the_match_at_its_increment() -> None:
    rule, ids = OpenAIRule(), list(range(3000))
    rule.serve(RulePrompt(ids, 0.0))
    changed = ids[:1300] + [-1] + ids[1301:]
    assert rule.serve(RulePrompt(changed, 1.0)).cached_tokens == 1280


@pytest.mark.parametrize(
    ("model", "price"), [("gpt-4o-2024-08-06", 0.5), ("gpt-4.1-mini", 0.25), ("gpt-5.1", 0.1)]
)
def test_cached_input_is_priced_per_model(model: str, price: float) -> None:
    second = twice(2048, model=model)[1]
    assert second.input_cost == pytest.approx(1 + 2048 * price) and second.written_tokens == 0


def test_a_zero_says_why() -> None:
    assert twice(1000)[1].why_none == "prompt under the 1,024-token minimum"
    assert twice(2048, gap_s=301.0)[1].why_none == "expired"
    assert twice(2048)[0].why_none == "first 128 tokens not cached"
    assert twice(2048)[1].why_none == ""
    rule, ids = OpenAIRule(), list(range(3000))
    rule.serve(RulePrompt(ids, 0.0))
    changed = ids[:800] + [-1] + ids[801:]
    assert rule.serve(RulePrompt(changed, 1.0)).why_none == "768-token match under the 1,024-token minimum"
