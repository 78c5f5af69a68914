"""Miss reasons from the previous request of a session, the prompt, and what the cache served."""

from __future__ import annotations

from engine.serve.miss_reason import PastRequest, classify

BS = 4
# regions of the prompts below: tokens 0-3 system, 4-7 tools, 8+ messages
KIND = lambda i: "system" if i < 4 else "tools" if i < 8 else "history"  # noqa: E731


def past(ids: list[int], model: str = "m") -> PastRequest:
    return PastRequest("prev", "s", model, ids)


def test_first_requests() -> None:
    assert classify(None, [1, 2], "m", False, 0, BS, KIND).reason == "first_request"
    assert classify(None, [1, 2], "m", True, 0, BS, KIND).reason == "previous_message_not_found"


def test_an_extension_misses_nothing() -> None:
    before = list(range(10))
    got = classify(past(before), before + [50, 51, 52], "m", True, 8, BS, KIND)
    assert (got.reason, got.expected_cached_tokens, got.first_change, got.lost_tokens) == (None, 8, -1, 0)
    repeat = classify(past(before + [60, 61]), before, "m", True, 8, BS, KIND)  # a prefix again: no change
    assert repeat.reason is None and repeat.first_change == -1 and repeat.expected_cached_tokens == 8


def test_changes_are_named_by_region() -> None:
    before = list(range(12))
    for index, reason in ((2, "system_changed"), (5, "tools_changed"), (9, "messages_changed")):
        prompt = before[:index] + [99] + before[index + 1 :]
        got = classify(past(before), prompt, "m", True, index // BS * BS, BS, KIND)
        assert (got.reason, got.first_change, got.lost_tokens) == (reason, index, 12 - index)
        assert got.expected_cached_tokens == index // BS * BS


def test_eviction_and_model_names_come_first() -> None:
    before = list(range(12))
    assert classify(past(before), before + [7], "m", True, 4, BS, KIND).reason == "evicted"
    assert classify(past(before), before + [7], "other", True, 0, BS, KIND).reason == "model_changed"
    changed = [99] + before[1:]
    assert classify(past(before), changed, "m", True, 0, BS, KIND).reason == "system_changed"
