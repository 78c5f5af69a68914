"""Compaction: durable lines survive, budgets hold, unfittable contexts are refused, and each compaction
costs exactly one cache break after the rewrite point."""

from __future__ import annotations

import itertools

import pytest

import engine
from engine.bench.commands.compaction import PREFIXES, CompactedChat, policy_rows
from engine.bench.harness.replayer import Conversation, Replayer
from engine.bench.workloads.compaction_policies import POLICIES, Compactor, History
from engine.bench.workloads.longchat import build_long_chat, durable_lines
from engine.errors import CompactionError

TURNS, BUDGET, BS = 24, 1024, 16


@pytest.fixture(scope="module")
def setup(tiny_dir):
    e = engine.load(str(tiny_dir("qwen2", tokenizer=True)), device="cpu", block_size=BS, cache_tokens=1 << 15)
    chat = build_long_chat(e.tokenizer, TURNS, result_tokens=60, seed=3)
    return e, chat, lambda messages: len(e.render(messages))


@pytest.fixture(scope="module")
def replayed(setup):
    e, chat, count = setup
    convs, holders = [], {}
    for policy, prefix in itertools.product(POLICIES, PREFIXES):
        name = f"{policy}/{prefix}"
        holders[name] = CompactedChat(chat, prefix, Compactor(policy, BUDGET, count))
        convs.append(Conversation(name, holders[name].request, lambda t: chat[t].reply))
    replayer = Replayer(e, repeats=1, cold=False)
    return replayer.run(convs, TURNS), replayer.refused, chat, replayer.requests


def test_durable_lines_survive_every_policy(replayed) -> None:
    records, _, chat, requests = replayed
    assert sum(1 for r in records if r.meta["compaction"]) > 10
    for r in records:
        expected = [line for turn in chat[: r.turn - 1] for line in durable_lines(turn.reply)]
        text = "\n".join(str(m.get("content")) for m in requests[(r.conversation, r.turn - 1)][0].messages)
        assert all(line in text for line in expected), r.conversation
    assert len(expected) >= 4  # the conversation carries durable lines, so this test means something


def test_budget_is_respected_and_only_none_is_refused(replayed) -> None:
    records, refused, _, _ = replayed
    assert set(refused) == {"none/stable", "none/timestamp-first"}
    assert all("exceeds the budget" in why for _, why in refused.values())
    assert all(r.meta["utilization"] <= 1.0 for r in records)
    for name in {r.conversation for r in records} - set(refused):
        assert max(r.turn for r in records if r.conversation == name) == TURNS


def test_each_compaction_costs_one_cache_break(replayed) -> None:
    records, _, _, _ = replayed
    for policy in POLICIES:
        rs = [r for r in records if r.conversation == f"{policy}/stable"]
        for r in rs[1:]:
            event = r.meta["compaction"]
            if "summarized" in event or "dropped" in event:  # rewritten from the first history message on
                system_end = next(end for label, _, end in r.regions if label == "system")
                first_message_end = next(end for _, start, end in r.regions if start == system_end)
                assert system_end <= r.first_change < first_message_end and r.cached_tokens <= r.first_change
            elif event:  # only tool results cleared: reuse runs up to the first cleared result
                assert r.change_region.startswith("tool #") and r.cached_tokens <= r.first_change
            else:  # otherwise every request extends the previous one and its reply
                assert r.first_change == -1
    rows = {row["conversation"]: row for row in policy_rows(records, {}, [r.conversation for r in records])}
    every, batch = rows["compact-every-turn/stable"], rows["batch-at-threshold/stable"]
    assert every["events"] > batch["events"] > 0
    assert every["computed_tokens"] > batch["computed_tokens"]  # batching beats compacting every turn
    cleared_only = [
        r
        for r in records
        if r.meta["compaction"].startswith("cleared") and "summarized" not in r.meta["compaction"]
    ]
    assert cleared_only and all(r.conversation.startswith("clear-then-summarize/") for r in cleared_only)


def test_timestamp_prefix_breaks_every_turn_whatever_the_policy(replayed) -> None:
    records, _, _, _ = replayed
    for r in (r for r in records if r.conversation.endswith("/timestamp-first") and r.turn > 1):
        assert r.first_change >= 0 and r.change_region == "system" and r.cached_share < 0.1


def test_a_compaction_that_loses_a_durable_line_is_rejected(setup) -> None:
    _, chat, count = setup

    class Lossy(Compactor):  # folds turns without carrying their durable lines
        def _fold(self, history, frame) -> int:
            n = len(history.turns)
            history.turns, history.folded = [], history.folded + n
            return n

    holder = CompactedChat(chat, "stable", Lossy("batch-at-threshold", BUDGET, count))
    with pytest.raises(CompactionError, match="dropped durable line"):
        for t in range(TURNS):
            holder.request(t, [turn.reply for turn in chat[:t]])


def test_an_unfittable_context_is_refused(setup) -> None:
    _, chat, count = setup
    holder = CompactedChat(chat, "stable", Compactor("batch-at-threshold", 120, count))
    with pytest.raises(CompactionError, match="refused, never cut"):
        holder.request(0, [])


def test_history_renders_summary_notes_first() -> None:
    h = History(turns=[[{"role": "user", "content": "hi"}]], folded=3, notes=["DECISION keep"], prose="p")
    first = h.messages()[0]["content"]
    assert first.startswith("<summary>\nTurns 1-3 were summarized.") and "DECISION keep" in first


def test_answers_after_the_end(tiny_dir) -> None:
    """--answers on a tiny model: every context is asked the ten questions after the last turn, none passes
    the budget, and `none` (refused in the replay) has no context to ask."""
    from engine.bench.harness.compaction_answers import answer_rows, ask_after_the_end
    from engine.bench.workloads.compaction_questions import questions, updates_for

    e = engine.load(str(tiny_dir("qwen2", tokenizer=True)), device="cpu", block_size=BS, cache_tokens=1 << 15)
    count = lambda messages: len(e.render(messages))  # noqa: E731
    updates = updates_for(6, seed=0)
    chat = build_long_chat(e.tokenizer, 6, result_tokens=60, seed=0, notes=updates.note)
    policies = ["none", "clear-then-summarize", "sliding-window"]
    holders = {p: CompactedChat(chat, "stable", Compactor(p, 400, count)) for p in policies}
    convs = [Conversation(p, h.request, lambda t: chat[t].reply) for p, h in holders.items()]
    replayer = Replayer(e, repeats=1, cold=False)
    records = replayer.run(convs, 6)
    qs = questions(chat, updates)
    contexts = {p: h.after_the_end for p, h in holders.items()}
    answers, cut = ask_after_the_end(e, contexts, replayer.refused, qs, max_new_tokens=2)
    assert not cut and "refused at turn" in answers["none"]["refused"]
    for policy in policies[1:]:
        a = answers[policy]
        assert len(a["answers"]) == 10 and 0 < a["context_tokens"] <= 400
        assert {x["verdict"] for x in a["answers"]} <= {"right", "stale", "wrong"}
        history = holders[policy].history
        assert history.folded + len(history.turns) == 6  # every turn, the last included, kept or folded
    rows = answer_rows(answers, policy_rows(records, replayer.refused, policies))
    assert [r["conversation"] for r in rows] == policies and rows[0]["accuracy"] is None


def test_ctrl_c_while_answering_keeps_the_replay_and_the_answered_contexts(
    tiny_dir, tmp_path, monkeypatch, capsys
) -> None:
    """A Ctrl-C in the answers phase (the 14th question: the 2nd policy's 4th) writes the whole replay and the
    contexts answered before it, marked partial, and exits 130."""
    import json

    import engine.bench.harness.compaction_answers as harness
    from engine.bench.__main__ import main

    real, calls = harness.verdict, []

    def verdict(*args):
        calls.append(1)
        if len(calls) == 14:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(harness, "verdict", verdict)
    out = tmp_path / "run"
    model = str(tiny_dir("qwen2", tokenizer=True))
    policies = ["clear-then-summarize", "sliding-window"]
    argv = ["compaction", "--answers", "--turns", "6", "--budget", "400", "--repeats", "1", "--model", model]
    assert main([*argv, "--policies", *policies, "--out", str(out)]) == 130
    err = capsys.readouterr().err
    assert (
        err.splitlines()[-1]
        == f"interrupted: kept 24 finished turns and 1 contexts' answers in {out} (partial)"
    )
    assert "answers: " in err  # the phase's progress bar
    data = json.loads((out / "turns.json").read_text())
    assert data["environment"]["partial"] is True
    assert list(data["answers"]) == ["clear-then-summarize/stable"]
    assert len(data["answers"]["clear-then-summarize/stable"]["answers"]) == 10
    report = (out / "report.md").read_text()
    assert "**Partial run**" in report and "Answers interrupted: 1 of 4 contexts answered." in report


def test_answers_need_enough_turns(tmp_path) -> None:
    from engine.bench.__main__ import main

    with pytest.raises(CompactionError, match="--answers needs --turns of at least 6, got 3"):
        main(["compaction", "--answers", "--turns", "3", "--model", str(tmp_path / "no-model")])
