"""DeepSeek's rules: the current prefix units (end of input, end of output, detected common prefixes; a hit
needs a whole unit, hits counted in 64-token units) and the 2024 one (64-token units from token 0, nothing under 64), no expiry, hits at a
tenth."""

from __future__ import annotations

import pytest

from engine.traces.providers.base import RulePrompt
from engine.traces.providers.deepseek import DeepSeekRule
from engine.traces.providers.deepseek_2024 import DeepSeek2024Rule

A, B, C, D = (list(range(k * 1000, k * 1000 + 300)) for k in range(1, 5))


@pytest.mark.parametrize(("tokens", "cached"), [(63, 0), (64, 64), (127, 64), (1151, 1088)])
def test_2024_units_of_64_from_token_0(tokens: int, cached: int) -> None:
    rule, ids = DeepSeek2024Rule(), list(range(tokens))
    rule.serve(RulePrompt(ids, 0.0))
    served = rule.serve(RulePrompt(ids, 86400.0))  # a day later: best effort, modelled as kept
    assert served.cached_tokens == cached and served.input_cost == pytest.approx(tokens - cached * 0.9)


def test_2024_a_zero_says_why() -> None:
    rule = DeepSeek2024Rule()
    assert rule.serve(RulePrompt(list(range(63)), 0.0)).why_none == "prompt under the 64-token minimum"
    assert rule.serve(RulePrompt(list(range(100)), 1.0)).why_none == "first 64 tokens not cached"
    assert rule.serve(RulePrompt(list(range(100)), 2.0)).why_none == ""


def test_a_conversation_hits_the_end_of_the_previous_output() -> None:
    """Turn 2 is turn 1's input + its output + more: the output-end unit is matched whole."""
    rule = DeepSeekRule()
    first = rule.serve(RulePrompt(A, 0.0, reply_ids=B))
    assert first.cached_tokens == 0 and first.stored_tokens == 600
    assert rule.serve(RulePrompt(A + B + C, 1.0)).cached_tokens == 576  # 600 in whole 64-token units


def test_a_partial_match_of_a_unit_misses_then_the_common_prefix_is_stored() -> None:
    """The guide's example 2: A+B then A+C misses (no whole unit), and stores A; A+D then hits A."""
    rule = DeepSeekRule()
    rule.serve(RulePrompt(A + B, 0.0))
    assert rule.serve(RulePrompt(A + C, 1.0)).cached_tokens == 0
    assert rule.serve(RulePrompt(A + D, 2.0)).cached_tokens == 256  # A's 300 tokens, in 64-token units


def test_units_are_per_model() -> None:
    rule = DeepSeekRule()
    rule.serve(RulePrompt(A, 0.0, "deepseek-chat"))
    assert rule.serve(RulePrompt(A + B, 1.0, "deepseek-reasoner")).cached_tokens == 0
    assert rule.serve(RulePrompt(A + B, 2.0, "deepseek-chat")).cached_tokens == 256


def test_a_zero_says_why() -> None:
    rule = DeepSeekRule()
    assert rule.serve(RulePrompt(A + B, 0.0)).why_none == "no stored unit is a whole prefix of it"
    assert (
        rule.serve(RulePrompt(A + C, 1.0)).why_none
        == "shares 300 tokens with the request before, no whole stored unit"
    )
    assert rule.serve(RulePrompt(A + D, 2.0)).why_none == ""


def test_hits_come_in_64_token_units_and_a_shorter_match_reads_nothing() -> None:
    rule = DeepSeekRule()
    rule.serve(RulePrompt(list(range(50)), 0.0, reply_ids=[7] * 80))
    assert rule.serve(RulePrompt([*range(50), *[7] * 80, 1], 1.0)).cached_tokens == 128
    short = DeepSeekRule()
    short.serve(RulePrompt(list(range(50)), 0.0))
    served = short.serve(RulePrompt([*range(50), 9], 1.0))
    assert served.cached_tokens == 0 and served.why_none == "50-token match under the 64-token unit"
