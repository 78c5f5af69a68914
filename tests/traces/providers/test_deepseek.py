"""DeepSeek's rule: 64-token units from token 0, nothing under 64, no expiry, hits at a tenth."""

from __future__ import annotations

import pytest

from engine.traces.providers.base import RulePrompt
from engine.traces.providers.deepseek import DeepSeekRule


@pytest.mark.parametrize(("tokens", "cached"), [(63, 0), (64, 64), (127, 64), (1151, 1088)])
def test_units_of_64_from_token_0(tokens: int, cached: int) -> None:
    rule, ids = DeepSeekRule(), list(range(tokens))
    rule.serve(RulePrompt(ids, 0.0))
    served = rule.serve(RulePrompt(ids, 86400.0))  # a day later: best effort, modelled as kept
    assert served.cached_tokens == cached and served.input_cost == pytest.approx(tokens - cached * 0.9)


def test_a_zero_says_why() -> None:
    rule = DeepSeekRule()
    assert rule.serve(RulePrompt(list(range(63)), 0.0)).why_none == "prompt under the 64-token minimum"
    assert rule.serve(RulePrompt(list(range(100)), 1.0)).why_none == "first 64 tokens not cached"
    assert rule.serve(RulePrompt(list(range(100)), 2.0)).why_none == ""
