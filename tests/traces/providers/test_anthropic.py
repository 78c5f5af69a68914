"""Anthropic's rule on content blocks (tools -> system -> messages): breakpoints on blocks, the 20-block
lookback, per-model minimum, TTL refreshed on hit, prices; and on real request bodies, a breakpoint on a
tools block, on one of several system blocks and on one of several text blocks."""

from __future__ import annotations

import copy

import pytest

from engine.loading.tokenizer import load_tokenizer, qwen_tokenizer_dir
from engine.traces.anthropic_messages import parse_anthropic
from engine.traces.blocks import BlockChain
from engine.traces.providers.anthropic import AnthropicRule
from engine.traces.providers.base import RulePrompt
from engine.traces.request import FIVE_MINUTES, ONE_HOUR

BLOCK = 100  # tokens per content block in these prompts


def prompt(
    blocks: int, breakpoints: list[int], t: float = 0.0, ttl: float = FIVE_MINUTES, model: str | None = None
):
    """`blocks` blocks of BLOCK tokens (hashes 0, 1, 2, ... : one prefix); breakpoints after the given
    (1-based) blocks."""
    chain = tuple((i.to_bytes(4, "big"), BLOCK * (i + 1)) for i in range(blocks))
    return RulePrompt(
        [0] * (BLOCK * blocks), t, model, chain=chain, breakpoints=tuple((b - 1, ttl) for b in breakpoints)
    )


def test_write_then_read() -> None:
    rule = AnthropicRule()
    write = rule.serve(prompt(12, [12]))
    assert (write.cached_tokens, write.written_tokens, write.stored_tokens) == (0, 1200, 1200)
    assert write.input_cost == pytest.approx(1200 * 1.25)
    read = rule.serve(prompt(14, [14], t=10))  # lookback finds the entry 2 blocks back
    assert (read.cached_tokens, read.written_tokens) == (1200, 200)
    assert read.input_cost == pytest.approx(1200 * 0.1 + 200 * 1.25)


def test_no_breakpoint_no_caching() -> None:
    rule = AnthropicRule()
    rule.serve(prompt(12, []))
    assert rule.serve(prompt(12, [], t=1)).cached_tokens == 0


@pytest.mark.parametrize(
    ("later_blocks", "cached", "unreached"), [(20, 1200, None), (21, 0, "beyond_lookback")]
)
def test_lookback_reaches_20_blocks(later_blocks: int, cached: int, unreached: str | None) -> None:
    rule = AnthropicRule()
    rule.serve(prompt(12, [12]))
    served = rule.serve(prompt(12 + later_blocks, [12 + later_blocks], t=1))
    assert (served.cached_tokens, served.unreached) == (cached, unreached)


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
    served = AnthropicRule().serve(prompt(blocks, [blocks], model=model))
    assert served.written_tokens == written and served.below_minimum == (written == 0)


@pytest.mark.parametrize(("gap", "cached", "unreached"), [(300.0, 1200, None), (301.0, 0, "ttl_expired")])
def test_five_minute_ttl_expires(gap: float, cached: int, unreached: str | None) -> None:
    rule = AnthropicRule()
    rule.serve(prompt(12, [12]))
    served = rule.serve(prompt(12, [12], t=gap))
    assert (served.cached_tokens, served.unreached) == (cached, unreached)


def test_a_hit_refreshes_the_ttl() -> None:
    rule = AnthropicRule()
    rule.serve(prompt(12, [12]))
    rule.serve(prompt(12, [12], t=200))
    assert (
        rule.serve(prompt(12, [12], t=450)).cached_tokens == 1200
    )  # 450 s after the write, 250 after the hit


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
    rule.serve(prompt(12, [12], t=1000))
    far = rule.serve(prompt(33, [33], t=1001))  # the live entry is 21 blocks before the breakpoint
    assert far.why_none == "entry beyond the 20-block lookback"


@pytest.fixture(scope="module")
def chain() -> BlockChain:
    return BlockChain(load_tokenizer(qwen_tokenizer_dir()))


LONG = "Every tool call is logged with its arguments and its result, kept for the audit trail. " * 40
TOOLS = [
    {"name": f"tool_{i}", "description": LONG, "input_schema": {"type": "object", "properties": {}}}
    for i in range(2)
]


def body(system: list[str], user: list[str]) -> dict:
    return {
        "model": "claude-sonnet-4-5",
        "tools": copy.deepcopy(TOOLS),
        "system": [{"type": "text", "text": s} for s in system],
        "messages": [{"role": "user", "content": [{"type": "text", "text": u} for u in user]}],
    }


def served_twice(chain: BlockChain, first: dict, second: dict):
    rule = AnthropicRule()
    out = []
    for t, b in enumerate((first, second)):
        req = parse_anthropic(b)
        marks = tuple((bp.block, bp.ttl_s) for bp in req.breakpoints)
        out.append(rule.serve(RulePrompt([], float(t), req.model, chain=chain.chain(req), breakpoints=marks)))
    return out


def test_a_breakpoint_on_the_tools_survives_a_changed_system_prompt(chain: BlockChain) -> None:
    """Tools come first in Anthropic's order: a cached tools prefix is read even though the system prompt
    after it changed (rendered, these templates put the tools after the system prompt)."""
    first, second = body(["Today is Monday."], ["Hi"]), body(["Today is Tuesday."], ["Hi"])
    for b in (first, second):
        b["tools"][-1]["cache_control"] = {"type": "ephemeral"}
    write, read = served_twice(chain, first, second)
    tools = chain.chain(parse_anthropic(first))[1][1]
    assert write.written_tokens == tools > 1024 and read.cached_tokens == tools


def test_a_breakpoint_on_one_of_several_system_blocks(chain: BlockChain) -> None:
    """The breakpoint closes its own block: the system block after it may change."""
    first, second = body([LONG, "Session 1."], ["Hi"]), body([LONG, "Session 2."], ["Hi"])
    for b in (first, second):
        b["system"][0]["cache_control"] = {"type": "ephemeral"}
    write, read = served_twice(chain, first, second)
    through = chain.chain(parse_anthropic(first))[2][1]  # tools, tools, the first system block
    assert write.written_tokens == through and read.cached_tokens == through


def test_a_breakpoint_on_one_of_several_text_blocks(chain: BlockChain) -> None:
    first, second = body(["Be brief."], [LONG, "Question A"]), body(["Be brief."], [LONG, "Question B"])
    for b in (first, second):
        b["messages"][0]["content"][0]["cache_control"] = {"type": "ephemeral"}
    write, read = served_twice(chain, first, second)
    through = chain.chain(parse_anthropic(first))[3][1]  # 2 tools, the system block, the first text block
    assert read.cached_tokens == through == write.written_tokens


def test_the_lookback_counts_blocks_not_messages(chain: BlockChain) -> None:
    """One user message of 25 text blocks: the earlier entry is 25 blocks back, out of reach."""
    first = body(["Be brief."], [LONG])
    first["messages"][0]["content"][0]["cache_control"] = {"type": "ephemeral"}
    second = body(["Be brief."], [LONG, *[f"note {i}" for i in range(25)]])
    second["messages"][0]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    near = body(["Be brief."], [LONG, *[f"note {i}" for i in range(20)]])
    near["messages"][0]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    assert served_twice(chain, first, second)[1].unreached == "beyond_lookback"
    assert served_twice(chain, first, near)[1].cached_tokens == chain.chain(parse_anthropic(first))[-1][1]
