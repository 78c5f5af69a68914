"""Anthropic's rule: breakpoints only, 20-block lookback, per-model minimum, TTL refreshed on hit, prices."""

from __future__ import annotations

import pytest

from engine.traces.providers.anthropic import AnthropicRule
from engine.traces.providers.base import RulePrompt
from engine.traces.request import FIVE_MINUTES, ONE_HOUR

BLOCK = 100  # tokens per content block in these prompts


def prompt(
    blocks: int, breakpoints: list[int], t: float = 0.0, ttl: float = FIVE_MINUTES, model: str | None = None
):
    """`blocks` blocks of BLOCK tokens; breakpoints after the given (1-based) blocks."""
    ends = tuple(BLOCK * (i + 1) for i in range(blocks))
    return RulePrompt(
        list(range(BLOCK * blocks)), t, model, tuple((BLOCK * b, ttl) for b in breakpoints), ends
    )


def test_write_then_read() -> None:
    rule = AnthropicRule()
    write = rule.serve(prompt(12, [12]))
    assert (write.cached_tokens, write.written_tokens) == (0, 1200)
    assert write.input_cost == pytest.approx(1200 * 1.25)
    read = rule.serve(prompt(14, [14], t=10))  # lookback finds the entry 2 blocks back
    assert (read.cached_tokens, read.written_tokens) == (1200, 200)
    assert read.input_cost == pytest.approx(1200 * 0.1 + 200 * 1.25)


def test_no_breakpoint_no_caching() -> None:
    rule = AnthropicRule()
    rule.serve(prompt(12, []))
    assert rule.serve(prompt(12, [], t=1)).cached_tokens == 0


@pytest.mark.parametrize(("later_blocks", "cached"), [(20, 1200), (21, 0)])
def test_lookback_reaches_20_blocks(later_blocks: int, cached: int) -> None:
    rule = AnthropicRule()
    rule.serve(prompt(12, [12]))
    assert rule.serve(prompt(12 + later_blocks, [12 + later_blocks], t=1)).cached_tokens == cached


@pytest.mark.parametrize(
    ("blocks", "model", "written"),
    [
        (10, "claude-sonnet-4-5", 0),
        (11, "claude-sonnet-4-5", 1100),  # 1,000 < 1,024 <= 1,100
        (20, "claude-sonnet-4-6", 0),
        (21, "claude-sonnet-4-6", 2100),
        (40, "claude-opus-4-5", 0),
        (41, "claude-opus-4-5", 4100),
    ],
)
def test_model_minimum(blocks: int, model: str, written: int) -> None:
    assert AnthropicRule().serve(prompt(blocks, [blocks], model=model)).written_tokens == written


def test_minimum_boundary_1023_vs_1024() -> None:
    def served(tokens: int):
        rule, ids = AnthropicRule(), list(range(tokens + 10))
        p = RulePrompt(ids, 0.0, None, ((tokens, FIVE_MINUTES),), (tokens,))
        rule.serve(p)
        return rule.serve(RulePrompt(ids, 1.0, None, ((tokens, FIVE_MINUTES),), (tokens,)))

    assert served(1023).cached_tokens == 0 and served(1024).cached_tokens == 1024


@pytest.mark.parametrize(("gap", "cached"), [(300.0, 1200), (301.0, 0)])
def test_five_minute_ttl_expires(gap: float, cached: int) -> None:
    rule = AnthropicRule()
    rule.serve(prompt(12, [12]))
    assert rule.serve(prompt(12, [12], t=gap)).cached_tokens == cached


def test_a_hit_refreshes_the_ttl() -> None:
    rule = AnthropicRule()
    rule.serve(prompt(12, [12]))
    rule.serve(prompt(12, [12], t=200))
    assert (
        rule.serve(prompt(12, [12], t=450)).cached_tokens == 1200
    )  # 450 s after the write, 250 s after the hit


def test_one_hour_entries_cost_double_and_last_an_hour() -> None:
    rule = AnthropicRule()
    assert rule.serve(prompt(12, [12], ttl=ONE_HOUR)).input_cost == pytest.approx(1200 * 2.0)
    assert rule.serve(prompt(12, [12], t=3000, ttl=ONE_HOUR)).cached_tokens == 1200


def test_two_breakpoints_write_in_segments() -> None:
    rule = AnthropicRule()
    rule.serve(prompt(12, [12]))
    served = rule.serve(
        prompt(30, [12, 30], t=1)
    )  # the system-prompt breakpoint reads, the moving one writes
    assert (served.cached_tokens, served.written_tokens) == (1200, 1800)


def test_a_zero_says_why() -> None:
    rule = AnthropicRule()
    assert rule.serve(prompt(12, [])).why_none == "no cache_control breakpoint"
    assert rule.serve(prompt(8, [8])).why_none == "breakpoints under the 1,024-token minimum"
    assert rule.serve(prompt(12, [12], t=1)).why_none == "first write at its breakpoints"
    assert rule.serve(prompt(12, [12], t=2)).why_none == ""  # read
    assert rule.serve(prompt(12, [12], t=2 + FIVE_MINUTES + 1)).why_none == "expired"
