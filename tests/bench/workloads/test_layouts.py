"""Layouts replayed through the engine do what their definitions predict (tiny model, Qwen tokenizer)."""

from __future__ import annotations

import functools

import pytest

from engine.bench.harness.replayer import Conversation, Replayer
from engine.bench.workloads.layouts import LAYOUTS, WINDOW_MESSAGES
from engine.bench.workloads.scenario import build_scenario

BS = 16


@pytest.fixture(scope="module")
def replayed(tiny_dir, load):
    """Every layout over one scenario with a long stable prefix, scripted replies, 2 passes."""
    e = load(tiny_dir("qwen2", tokenizer=True), block_size=BS, cache_tokens=1 << 15)
    sc = build_scenario(e.tokenizer, "small", seed=1, turns=5, system_tokens=1200, tools=5, result_tokens=20)
    convs = [
        Conversation(n, functools.partial(f, sc), lambda t: sc.turns[t].reply) for n, f in LAYOUTS.items()
    ]
    records = Replayer(e, repeats=2, cold=False).run(convs, len(sc.turns))
    by = {name: [r for r in records if r.conversation == name] for name in LAYOUTS}
    return e, sc, by


def _lcp(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    return next((i for i in range(n) if a[i] != b[i]), n)


def test_cached_tokens_match_the_block_aligned_longest_common_prefix(replayed) -> None:
    """For every layout and turn: what the engine reused is exactly what the definition predicts."""
    e, sc, by = replayed
    for name, records in by.items():
        # what each earlier turn left in the cache: prompt + reply minus last token
        seen: list[list[int]] = []
        replies = [sc.turns[t].reply for t in range(len(sc.turns))]
        for t, rec in enumerate(records):
            req = LAYOUTS[name](sc, t, replies)
            ids = e.render(req.messages, req.tools)
            assert len(ids) == rec.prompt_tokens
            best = max((_lcp(ids, s) for s in seen), default=0)
            assert rec.cached_tokens == min(best, len(ids) - 1) // BS * BS, (name, t)
            from engine.bench.harness.replayer import reply_tokens

            seen.append(ids + reply_tokens(e, req, replies[t])[:-1])


def test_stable_first_serves_over_90_percent_after_turn_one(replayed) -> None:
    _, _, by = replayed
    assert all(r.cached_share > 0.9 for r in by["stable-first"][1:])
    assert all(r.first_change == -1 for r in by["stable-first"][1:])  # every request extends the last


def test_timestamp_first_never_reuses_past_the_timestamp(replayed) -> None:
    _, _, by = replayed
    # "<|im_start|>system\nCurrent time: 2026-11-30 09:..": reuse stops in the block holding the change
    for r in by["timestamp-first"][1:]:
        assert r.change_region == "system" and "2026-11-30 09:" in r.change_context.split("⟂")[0]
        assert r.first_change < 32 and r.cached_tokens == r.first_change // BS * BS


def test_shuffled_tools_reuse_ends_at_the_first_moved_tool(replayed) -> None:
    _, sc, by = replayed
    replies = [turn.reply for turn in sc.turns]
    for t, r in enumerate(by["shuffled-tools"][1:], start=1):
        before = [x["function"]["name"] for x in LAYOUTS["shuffled-tools"](sc, t - 1, replies).tools]
        now = [x["function"]["name"] for x in LAYOUTS["shuffled-tools"](sc, t, replies).tools]
        moved = next(i for i, (a, b) in enumerate(zip(before, now, strict=True)) if a != b)
        after = r.change_context.split("⟂")[1]
        assert r.change_region == "tools" and r.divergence_region in ("system", "tools")
        assert now[moved].startswith(after.split('"')[0]) or after.startswith(now[moved][:3])
        # an earlier turn may share a longer run of tools; never less than the previous turn does
        assert r.cached_tokens >= r.first_change // BS * BS


def test_dynamic_profile_breaks_at_the_profile_line(replayed) -> None:
    _, _, by = replayed
    for r in by["dynamic-profile"][1:]:
        assert r.change_region == "system" and "credits" in r.change_context
        assert r.cached_share > 0.3  # the policies before it are still reused


def test_sliding_window_breaks_right_after_the_tools_once_it_slides(replayed) -> None:
    _, _, by = replayed
    stable = by["stable-first"]
    for t, r in enumerate(by["sliding-window"]):
        history = 4 * t  # user, tool call, tool result, reply per earlier turn
        if history > WINDOW_MESSAGES:
            tools_end = max(end for label, _, end in r.regions if label in ("system", "tools"))
            assert r.cached_tokens <= tools_end and r.cached_tokens >= tools_end - BS
        else:
            assert r.cached_tokens == stable[t].cached_tokens


def test_text_format_reuses_history_text_but_not_the_reply_framing(replayed) -> None:
    _, _, by = replayed
    for r in by["text-format"][1:]:
        # the previous request ended with the tool result; the new text continues with "ASSISTANT: ..."
        assert r.change_region == "latest user" and "\nASSISTANT:" in r.change_context.split("⟂")[1][:16]
        assert r.cached_tokens == r.first_change // BS * BS


def test_same_content_in_every_layout(replayed) -> None:
    """Only the variable under test differs: each layout carries the same task, time and credits."""
    _, sc, _ = replayed
    replies = [t.reply for t in sc.turns]
    for name, layout in LAYOUTS.items():
        req = layout(sc, 2, replies)
        text = "\n".join(str(m.get("content")) for m in req.messages)
        turn = sc.turns[2]
        assert turn.task in text and turn.time in text and str(turn.credits) in text, name
        assert sorted(x["function"]["name"] for x in req.tools) == sorted(
            x["function"]["name"] for x in sc.tools
        )


def test_classic_timestamp_demonstration(tiny_dir, load) -> None:
    """20 requests sharing a 2,000-character system prompt: a timestamp line at the top vs at the end."""
    e = load(tiny_dir("qwen2", tokenizer=True), block_size=BS, cache_tokens=1 << 14)
    sc = build_scenario(e.tokenizer, "small", seed=2, system_tokens=600)
    system = sc.policies[:2000]
    assert len(system) == 2000
    totals = {}
    for where in ("top", "end"):
        cached = prompt = 0
        for i in range(20):
            stamp = f"Current time: 10:{i:02d}:{(7 * i) % 60:02d}"  # the same line, at the top or at the end
            content = f"{stamp}\n{system}" if where == "top" else system
            user = "Which policy covers refunds?" + ("" if where == "top" else f"\n{stamp}")
            gen = e.generate(
                [{"role": "system", "content": content}, {"role": "user", "content": user}],
                max_new_tokens=1,
                cache_salt=where,
            )
            cached, prompt = cached + gen.usage.cached_tokens, prompt + gen.usage.prompt_tokens
        totals[where] = cached / prompt
    assert totals["top"] == 0.0 and totals["end"] >= 0.9
