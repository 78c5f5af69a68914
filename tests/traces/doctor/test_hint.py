"""The doctor's cause from token ids alone (the server's hint, replay's change cause)."""

from __future__ import annotations

import pytest

from engine.loading.tokenizer import load_tokenizer, qwen_tokenizer_dir
from engine.prompts.regions import common_prefix
from engine.traces.doctor.hint import token_hint

RULES = "Rules: " + "be kind and brief. " * 40


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer(qwen_tokenizer_dir())


@pytest.mark.parametrize(
    ("a", "b", "cause", "words"),
    [
        ("Current time: 09:00:30 UTC\n", "Current time: 09:03:46 UTC\n", "clock", ("09:00:30", "09:03:46")),
        ("Memory at /tmp/x/-work/memory/ ok.\n", "Memory at /tmp/x/-elsewhere/memory/ ok.\n", "path", None),
        ("Credits left: 500.\n", "Credits left: 493.\n", "counter", ("500.", "493.")),
        (
            "billing: cch=a3f9c2e1;\n",
            "billing: cch=7b0d44fe;\n",
            "id_nonce",
            ("cch=a3f9c2e1;", "cch=7b0d44fe;"),
        ),
    ],
)
def test_the_changed_word_is_named_and_a_fix_would_serve_the_rest(tok, a, b, cause, words) -> None:
    before, prompt = tok(a + RULES).input_ids, tok(b + RULES).input_ids
    change = common_prefix(before, prompt)
    hint = token_hint(before, prompt, change, "system", tok.decode, 16)
    assert hint.cause == cause and (words is None or (hint.before, hint.after) == words)
    assert ("one nonce per session" if cause == "id_nonce" else "system prompt") in hint.fix
    assert hint.would_serve_tokens == (len(prompt) - 1) // 16 * 16  # all but the span: the rest re-aligns


def test_nothing_after_the_break_in_common_serves_only_the_prefix(tok) -> None:
    before, prompt = (
        tok("same start, then one thing").input_ids,
        tok("same start, then another entirely").input_ids,
    )
    change = common_prefix(before, prompt)
    assert token_hint(before, prompt, change, "history", tok.decode, 4).would_serve_tokens == change // 4 * 4
