"""Gemini's implicit rule: a per-model minimum, then a token-exact prefix match."""

from __future__ import annotations

import pytest

from engine.traces.providers.base import RulePrompt
from engine.traces.providers.gemini import GeminiRule


@pytest.mark.parametrize(
    ("model", "tokens", "cached"),
    [
        ("gemini-2.5-flash", 2047, 0),
        ("gemini-2.5-flash", 2048, 2048),
        ("gemini-3.1-pro-preview", 4095, 0),
        ("gemini-3.1-pro-preview", 4100, 4100),
        (None, 2050, 2050),
    ],
)
def test_model_minimum(model: str | None, tokens: int, cached: int) -> None:
    rule, ids = GeminiRule(), list(range(tokens))
    rule.serve(RulePrompt(ids, 0.0, model))
    assert rule.serve(RulePrompt(ids + [-5], 1.0, model)).cached_tokens == cached


def test_match_is_token_exact_past_the_last_whole_unit() -> None:
    rule, ids = GeminiRule(), list(range(3000))
    rule.serve(RulePrompt(ids, 0.0))
    served = rule.serve(RulePrompt(ids[:2100] + [-1] * 50, 1.0))
    assert served.cached_tokens == 2100 and served.input_cost == pytest.approx(2150 - 2100 * 0.9)


def test_a_zero_says_why() -> None:
    rule, ids = GeminiRule(), list(range(3000))
    assert rule.serve(RulePrompt(ids[:2000], 0.0)).why_none == "prompt under the 2,048-token minimum"
    assert rule.serve(RulePrompt(ids, 1.0)).why_none == "2,000-token match under the 2,048-token minimum"
    assert rule.serve(RulePrompt([-1, *ids], 2.0)).why_none == "first 64 tokens not cached"
    assert rule.serve(RulePrompt(ids, 3.0)).why_none == ""
