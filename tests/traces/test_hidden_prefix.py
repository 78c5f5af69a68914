"""The prompt a transcript lacks, estimated from its first recorded read: the hosted rules see it ahead of
the messages, so minimums apply to the whole prompt and shares are of the recorded base."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

import engine
from engine.kv.block_manager import BlockManager
from engine.traces.analysis import Analyzer
from engine.traces.hidden_prefix import FROM_FIRST_READ, GIVEN, HiddenPrefix, estimate, with_hidden
from engine.traces.inputs import load_inputs
from engine.traces.providers.anthropic import AnthropicRule
from engine.traces.providers.base import RulePrompt
from engine.traces.providers.local import LocalRule
from engine.traces.rendering import TraceRenderer
from tests.traces.agent_common import anthropic_usage, tool_result, tool_use, write_jsonl
from tests.traces.write_claude_code import ClaudeCode21

HAIKU = "claude-haiku-4-5-20251001"  # a 4,096-token minimum


@pytest.fixture(scope="module")
def tiny(tiny_dir):
    return engine.load(str(tiny_dir("qwen2", tokenizer=True)), device="cpu", cache_tokens=8192)


def subagent(folder: Path) -> Path:
    """A subagent's three requests: the first reads 6,000 tokens its parent's calls wrote (its system
    prompt and tools), then each reads what the one before left."""
    s = ClaudeCode21("session-h")
    s.user(1, "Find the parser.")
    for n, (read, write) in enumerate([(6000, 300), (6300, 200), (6500, 100)], 1):
        s.response(2 * n, f"msg_h{n}", [tool_use(f"t{n}", "a.py")], anthropic_usage(read, write))
        s.rows[-1]["message"]["model"] = HAIKU
        s.user(2 * n + 1, tool_result(f"t{n}", "x = 1"))
    return write_jsonl(folder / "session-h.jsonl", s.rows)


def test_estimated_from_the_first_recorded_read_or_given(tmp_path: Path) -> None:
    requests = load_inputs([subagent(tmp_path)]).requests
    assert estimate(requests) == {"session-h": HiddenPrefix(6000, FROM_FIRST_READ)}
    assert estimate(requests, 9000) == {"session-h": HiddenPrefix(9000, GIVEN)}
    tools_only = [replace(r, missing=("tools",)) for r in requests]  # its first read is of what it holds
    assert estimate(tools_only) == {} and estimate(tools_only, 50) == {"session-h": HiddenPrefix(50, GIVEN)}


def test_the_hidden_block_comes_first_with_a_breakpoint() -> None:
    prompt = RulePrompt(
        [5, 6, 7], 0.0, "m", chain=((b"a" * 16, 2), (b"b" * 16, 3)), breakpoints=((1, 300.0),)
    )
    seen = with_hidden(prompt, 4)
    assert len(seen.token_ids) == 7 and seen.token_ids[4:] == [5, 6, 7]
    assert [n for _, n in seen.chain] == [4, 6, 7] and seen.breakpoints == ((0, 300.0), (2, 300.0))
    assert with_hidden(prompt, 5).token_ids[0] != seen.token_ids[0]  # another size differs from token 0


def test_no_request_is_below_the_minimum_its_recorded_read_exceeds(tmp_path: Path, tiny) -> None:
    requests = load_inputs([subagent(tmp_path)]).requests

    def run(hidden: dict[str, HiddenPrefix]) -> list:
        local = LocalRule(BlockManager(tiny.blocks.num_blocks, tiny.blocks.block_size, b"h"))
        renderer = TraceRenderer(tiny.tokenizer, tiny.source.eos_ids)
        return Analyzer(renderer, local, [AnthropicRule()]).run(requests, hidden=hidden)

    bare = run({})
    assert all(r.served["anthropic"].below_minimum for r in bare)  # the messages alone: ~100 tokens
    given = [r.served["anthropic"] for r in run({"session-h": HiddenPrefix(6000, GIVEN)})]
    assert not any(s.below_minimum for s in given)
    assert given[0].cached_tokens == 0 and given[0].written_tokens > 6000  # the first write, whole prompt
    assert all(s.cached_tokens > 6000 for s in given[1:])
    assert all(s.prompt_tokens > 6000 for s in given)  # shares on the recorded base
    read = [r.served["anthropic"] for r in run({"session-h": HiddenPrefix(6000, FROM_FIRST_READ)})]
    assert read[0].cached_tokens == 6000 and read[0].written_tokens < 200  # held before, as recorded
