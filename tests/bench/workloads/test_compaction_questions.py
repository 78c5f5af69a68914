"""The questions of `compaction --answers`: four kinds from the chat itself, value updates written into
two user turns without changing the rest of the chat, and verdicts (right, stale, wrong)."""

from __future__ import annotations

import pytest

from engine.bench.workloads.compaction_questions import KINDS, Question, questions, updates_for, verdict
from engine.bench.workloads.longchat import build_long_chat
from engine.loading.tokenizer import load_tokenizer, qwen_tokenizer_dir


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(qwen_tokenizer_dir())


def test_updates_land_in_two_user_turns_and_nothing_else_changes(tokenizer) -> None:
    updates = updates_for(20, seed=1)
    plain = build_long_chat(tokenizer, 20, 40, seed=1)
    noted = build_long_chat(tokenizer, 20, 40, seed=1, notes=updates.note)
    changed = [t for t in range(20) if plain[t] != noted[t]]
    assert changed == [updates.early, updates.late] and updates.early < updates.late < 19
    assert str(updates.dock[1]) in noted[updates.late].user["content"]
    assert noted[updates.early].user["content"].startswith(plain[updates.early].user["content"])
    assert [t.result for t in plain] == [t.result for t in noted]


def test_ten_questions_of_four_kinds_answered_by_the_chat(tokenizer) -> None:
    updates = updates_for(12, seed=0)
    chat = build_long_chat(tokenizer, 12, 40, seed=0, notes=updates.note)
    qs = questions(chat, updates)
    assert [sum(q.kind == k for q in qs) for k in KINDS] == [5, 2, 2, 1]
    for q in qs[7:9]:  # only in tool results: the value is in that turn's result and in no user message
        assert any(q.expected in str(t.result["content"]) for t in chat)
    assert qs[9].expected in chat[-1].reply


def test_verdicts() -> None:
    dock = Question(KINDS[1], "Which dock?", "7", "3")
    assert verdict(dock, "Pickups go from dock 7 now.") == "right"
    assert verdict(dock, "Dock 3.") == "stale"
    assert verdict(dock, "Dock 17.") == "wrong"  # 7 inside 17 is not 7
    budget = Question(KINDS[0], "Budget?", "12000")
    assert verdict(budget, "The budget is 12,000 EUR.") == "right"
    assert verdict(Question(KINDS[0], "Id?", "DHL-2026-B"), "the contract is dhl-2026-b") == "right"
