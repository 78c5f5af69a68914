"""`--analyze` (no model forward) reports exactly what a full replay reports, request by request."""

from __future__ import annotations

from dataclasses import replace

import pytest

import engine
from engine.bench.harness.replayer import Conversation, Replayer, Request
from engine.kv.block_manager import BlockManager
from engine.traces.analysis import RECORDED, AnalyzedRequest, Analyzer, replies
from engine.traces.load import load_trace
from engine.traces.providers.local import LocalRule
from engine.traces.rendering import TraceRenderer
from engine.traces.request import TraceRequest
from engine.traces.shipped import EXAMPLES
from engine.traces.usage import RecordedUsage
from tests.traces.billing_trace import trace_turns


@pytest.fixture(scope="module")
def tiny(tiny_dir):
    return engine.load(str(tiny_dir("qwen2", tokenizer=True)), device="cpu", cache_tokens=8192)


def analyze(e, requests: list[TraceRequest]) -> list[AnalyzedRequest]:
    blocks = BlockManager(e.blocks.num_blocks, e.blocks.block_size, b"analysis")
    return Analyzer(TraceRenderer(e.tokenizer, e.source.eos_ids), LocalRule(blocks)).run(requests)


def replay(e, requests: list[TraceRequest]):
    following = replies(requests)
    conv = Conversation(
        "trace", lambda t, _: Request(requests[t].messages, requests[t].tools), lambda t: following[t]
    )
    return Replayer(e, repeats=1, cold=False).run([conv], len(requests))


def shipped_example() -> list[TraceRequest]:
    return load_trace(EXAMPLES["anthropic"])


def billing_trace() -> list[TraceRequest]:
    return [TraceRequest(t["messages"], t["tools"], session="billing") for t in trace_turns()]


@pytest.mark.parametrize("trace", [shipped_example, billing_trace])
def test_analysis_agrees_with_full_replay(tiny, trace) -> None:
    requests = trace()
    analyzed, replayed = analyze(tiny, requests), replay(tiny, requests)
    fields = (
        "prompt_tokens",
        "cached_tokens",
        "first_divergence",
        "divergence_region",
        "first_change",
        "change_region",
        "change_context",
    )
    for a, r in zip(analyzed, replayed, strict=True):
        assert {f: getattr(a, f) for f in fields} == {f: getattr(r, f) for f in fields}
    assert any(a.first_change >= 0 for a in analyzed)  # each trace has a change for the comparison to cover


def test_the_shipped_example_names_its_refreshed_clock(tiny) -> None:
    records = analyze(tiny, shipped_example())
    last = records[-1]
    assert last.regions and not any(
        r.regions for r in records[:-1]
    )  # the session's last, for the token strip
    assert last.change_region == "system" and "09:⟂11 UTC" in last.change_context  # the clock line


def test_hosted_rules_ride_along(tiny) -> None:
    from engine.traces.providers.anthropic import AnthropicRule
    from engine.traces.providers.openai import OpenAIRule

    blocks = BlockManager(tiny.blocks.num_blocks, 16, b"analysis")
    analyzer = Analyzer(
        TraceRenderer(tiny.tokenizer, tiny.source.eos_ids), LocalRule(blocks), [OpenAIRule(), AnthropicRule()]
    )
    records = analyzer.run(shipped_example())
    anthropic = [r.served["anthropic"] for r in records]
    # counted on the blocks' own text: request 1's 1,000 tokens are below Sonnet 4.5's 1,024
    assert anthropic[0].prompt_tokens < 1024 and anthropic[0].written_tokens == 0
    assert records[1].misses["anthropic"].reason == "below_minimum"
    assert anthropic[1].written_tokens == anthropic[1].prompt_tokens  # through the last block
    assert (
        anthropic[2].cached_tokens == anthropic[1].prompt_tokens
    )  # the moving breakpoint's entry, read back
    assert (
        anthropic[4].cached_tokens == 0 and records[4].misses["anthropic"].reason == "ttl_expired"
    )  # 7 min idle
    openai = [r.served["openai"].cached_tokens for r in records]
    assert openai[1] % 128 == 0 and openai[1] >= 1024 and openai[4] == 0 and openai[5] == 0
    assert [records[k].misses["openai"].reason for k in (0, 4, 5)] == [
        "first_request",
        "ttl_expired",
        "system_changed",
    ]
    assert records[5].misses["local"].reason == "system_changed" and records[3].misses["local"] is None


def test_a_cut_reply_and_a_servers_namespace_as_the_server_cached_them(tiny) -> None:
    """A reply cut at its token limit never generated an end-of-turn token, so the server cached one token
    less of it than of a finished reply; a request under another served name reads another namespace."""
    ask = [
        {"role": "system", "content": "You are terse. " * 12},
        {"role": "user", "content": "Count to ten."},
    ]
    reply = {"role": "assistant", "content": "one two three four five six seven eight nine ten " * 3}
    follow = [*ask, reply, {"role": "user", "content": "Again."}]
    block = tiny.blocks.block_size

    def cached(first: TraceRequest) -> list[int]:
        second = TraceRequest(follow, session="s", cache_salt=first.cache_salt)
        return [r.cached_tokens for r in analyze(tiny, [first, second])]

    finished, cut = (
        cached(TraceRequest(ask, session="s")),
        cached(TraceRequest(ask, session="s", reply_cut=True)),
    )
    renderer = TraceRenderer(tiny.tokenizer, tiny.source.eos_ids)
    prompt = renderer.prompt(TraceRequest(ask, session="s"))
    n = (
        len(prompt.ids) + len(renderer.reply(TraceRequest(ask), prompt, reply)) - 1
    )  # what a finished reply left
    assert finished[1] == n // block * block and cut[1] == (n - 1) // block * block
    other = [TraceRequest(ask, session="a", cache_salt="m"), TraceRequest(ask, session="b", cache_salt="m-b")]
    same = [TraceRequest(ask, session="a", cache_salt="m"), TraceRequest(ask, session="b", cache_salt="m")]
    assert analyze(tiny, other)[1].cached_tokens == 0 and analyze(tiny, same)[1].cached_tokens > 0


def test_the_local_miss_label_agrees_with_the_region_of_the_change(tiny) -> None:
    """Tools equal as values but with their keys in another order render otherwise: the tokens break in the
    tools. The local cache (and this project's server, as recorded usage) labels a miss by the region of the
    first differing token, so `local_miss` agrees with `change_region`: it said messages_changed (a message
    changed too) or nothing at all (none did) while the region said tools."""
    params = {"type": "object", "properties": {"city": {"type": "string"}}}
    tool = {"type": "function", "function": {"name": "w", "description": "d", "parameters": params}}
    reordered = {"type": "function", "function": {"description": "d", "name": "w", "parameters": params}}
    system = {"role": "system", "content": "You are a helpful agent. " * 10}
    ask = {"role": "user", "content": "Hello there, list the files. " * 5}
    turn = [system, ask, {"role": "assistant", "content": "Sure."}, {"role": "user", "content": "And dirs?"}]
    edited = [*turn[:2], {"role": "assistant", "content": "Sure, here."}, turn[3]]
    mid = [*turn, {"role": "system", "content": "Agents: A. " * 20}]  # a mid-conversation system message
    moved = [*turn, {"role": "system", "content": "Agents: B. " * 20}]
    wrote = RecordedUsage("kvtestbed", prompt_tokens=200, cache_read_tokens=0, cache_write_tokens=192)
    server = RecordedUsage("kvtestbed", prompt_tokens=300, cache_read_tokens=96, cache_write_tokens=192)
    cases = [  # (first, second, the local miss, the region it names)
        (TraceRequest([system, ask], [tool]), TraceRequest(edited, [reordered]), "tools_changed", "tools"),
        (
            TraceRequest([system, ask], [tool], recorded=wrote),
            TraceRequest(turn, [reordered], recorded=server),
            "tools_changed",
            "tools",
        ),
        (TraceRequest(turn, [tool]), TraceRequest(edited, [tool]), "messages_changed", "assistant #2"),
        (TraceRequest(mid, [tool]), TraceRequest([*moved, ask], [tool]), "messages_changed", "system #4"),
        (TraceRequest([system, ask], [tool]), TraceRequest(turn, [tool, tool]), "tools_changed", "tools"),
        (
            TraceRequest([system, ask]),
            TraceRequest([{"role": "system", "content": "Be brief."}, ask]),
            "system_changed",
            "system",
        ),
    ]
    for first, second, reason, region in cases:
        got = analyze(tiny, [replace(first, session="s"), replace(second, session="s")])[1]
        assert (got.misses["local"].reason, got.change_region) == (reason, region)
        if second.recorded is not None:  # the server's own usage: labelled as its tokens broke too
            assert got.misses[RECORDED].reason == reason
