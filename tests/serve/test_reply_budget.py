"""The reply's token budget: the prompt is never cut (refused in Anthropic's words), max_tokens clamped to
what the context leaves where the API allows it and to the server's cap everywhere, every clamp reported."""

from __future__ import annotations

import pytest

from engine.errors import ContextOverflowError
from engine.serve.reply_budget import Budget, reply_budget


def test_unasked_is_the_default_or_what_is_left_and_the_limit_is_reported() -> None:
    unasked = {"asked": None, "granted": 1024, "by": "--default-max-tokens"}
    assert reply_budget(100, None, 8192, 1024, None, False) == Budget(1024, unasked)
    assert reply_budget(8000, None, 8192, 1024, None, False) == Budget(192)  # the context's end
    capped = {"asked": None, "granted": 16, "by": "--max-tokens-cap"}
    assert reply_budget(100, None, 8192, 1024, 16, True) == Budget(16, capped)


def test_unasked_without_a_default_runs_to_the_context_end_under_the_cap() -> None:
    assert reply_budget(100, None, 8192, None, None, True) == Budget(8092)
    capped = {"asked": None, "granted": 500, "by": "--max-tokens-cap"}
    assert reply_budget(100, None, 8192, None, 500, True) == Budget(500, capped)


def test_asked_is_clamped_to_the_context_where_the_api_allows_it() -> None:
    assert reply_budget(27000, 64000, 65536, 1024, None, True) == Budget(
        38536, {"asked": 64000, "granted": 38536, "by": "context"}
    )
    with pytest.raises(ContextOverflowError, match="max_tokens 64000 exceeds the model's context"):
        reply_budget(27000, 64000, 65536, 1024, None, False)
    assert reply_budget(100, 50, 8192, 1024, None, False) == Budget(50)


def test_the_cap_clamps_on_every_api() -> None:
    note = {"asked": 64000, "granted": 8, "by": "--max-tokens-cap"}
    assert reply_budget(27000, 64000, 65536, 1024, 8, False) == Budget(8, note)
    assert reply_budget(100, 4, 8192, 1024, 8, False) == Budget(4)


def test_a_prompt_with_no_room_is_too_long_in_anthropics_words() -> None:
    for prompt in (8192, 9000):
        with pytest.raises(ContextOverflowError) as e:
            reply_budget(prompt, None, 8192, 1024, None, True)
        assert str(e.value).startswith(f"prompt is too long: {prompt} tokens > 8191 maximum")
