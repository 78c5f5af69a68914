"""Miss reasons from the previous request of a session, the prompt, and what the cache served."""

from __future__ import annotations

from engine.serve.miss_reason import PastRequest, classify, token_array

BS = 4
# regions of the prompts below: tokens 0-3 system, 4-7 tools, 8+ messages
KIND = lambda i: "system" if i < 4 else "tools" if i < 8 else "history"  # noqa: E731


PIECES = {1: "Hel", 2: "lo", 3: "Hello", 4: " world", 5: " there", 6: "<end>"}  # 7+: "t7", ...


def decode(ids) -> str:  # noqa: ANN001
    return "".join(PIECES.get(i, f"t{i}") for i in ids)


def past(ids: list[int], model: str = "m", prompt: int | None = None) -> PastRequest:
    return PastRequest("prev", "key:k", "s", model, len(ids) if prompt is None else prompt, token_array(ids))


def classify_(*args):  # noqa: ANN002, ANN202
    return classify(*args, decode)


def test_first_requests() -> None:
    assert classify_(None, [1, 2], "m", False, 0, BS, KIND).reason == "first_request"
    assert classify_(None, [1, 2], "m", True, 0, BS, KIND).reason == "previous_message_not_found"


def test_an_extension_misses_nothing() -> None:
    before = list(range(10))
    got = classify_(past(before), before + [50, 51, 52], "m", True, 8, BS, KIND)
    assert (got.reason, got.expected_cached_tokens, got.first_change, got.lost_tokens) == (None, 8, -1, 0)
    repeat = classify_(past(before + [60, 61]), before, "m", True, 8, BS, KIND)  # a prefix again: no change
    assert repeat.reason is None and repeat.first_change == -1 and repeat.expected_cached_tokens == 8


def test_changes_are_named_by_region() -> None:
    before = list(range(12))
    for index, reason in ((2, "system_changed"), (5, "tools_changed"), (9, "messages_changed")):
        prompt = before[:index] + [99] + before[index + 1 :]
        got = classify_(past(before), prompt, "m", True, index // BS * BS, BS, KIND)
        assert (got.reason, got.first_change, got.lost_tokens) == (reason, index, 12 - index)
        assert got.expected_cached_tokens == index // BS * BS


def test_eviction_and_model_names_come_first() -> None:
    before = list(range(12))
    assert classify_(past(before), before + [7], "m", True, 4, BS, KIND).reason == "evicted"
    assert classify_(past(before), before + [7], "other", True, 0, BS, KIND).reason == "model_changed"
    changed = [99] + before[1:]
    assert classify_(past(before), changed, "m", True, 0, BS, KIND).reason == "system_changed"


def test_a_reply_that_came_back_cut_otherwise_is_reply_retokenized() -> None:
    """The model sampled "Hel" "lo" " world"; the client sent the same text back, which tokenizes as
    "Hello" " world": the break is in the reply, the text is unchanged."""
    prompt = list(range(10, 22))  # 12 prompt tokens
    sampled = prompt + [1, 2, 4]
    got = classify_(past(sampled, prompt=12), prompt + [3, 4, 6, 30], "m", True, 12, BS, KIND)
    assert (got.reason, got.first_change, got.lost_tokens) == ("reply_retokenized", 12, 3)
    assert got.retokenized == {
        "sampled": ["t19", "t20", "t21", "Hel", "lo", " world"],
        "prompt": ["t19", "t20", "t21", "Hello", " world", "<end>", "t30"],
    }
    cut = classify_(past(prompt + [1], prompt=12), prompt + [3, 6], "m", True, 12, BS, KIND)
    assert cut.reason == "reply_retokenized"  # all that was left of the reply ("Hel") came back as "Hello"
    edited = classify_(past(sampled, prompt=12), prompt + [3, 5, 6], "m", True, 12, BS, KIND)
    assert edited.reason == "reply_retokenized"  # the first break is still the cut, not the edit after it
    other = classify_(past(sampled, prompt=12), prompt + [5, 6], "m", True, 12, BS, KIND)
    assert (other.reason, other.retokenized) == ("messages_changed", None)  # the text differs
    in_prompt = classify_(past(prompt[:11] + [1, 2], prompt=13), prompt[:11] + [3], "m", True, 8, BS, KIND)
    assert in_prompt.reason == "messages_changed"  # a break before the reply is not the reply's


def test_a_token_the_tokenizer_normalizes_is_reply_retokenized() -> None:
    """The model sampled U+F9C7 (a compatibility ideograph); its text came back and the tokenizer's NFC wrote
    U+5289: the same text as the tokenizer sees it, so the server's rendering, not the client's edit."""
    pieces = {40: "\uf9c7", 41: "\u5289", 42: "!"}
    prompt = list(range(10, 22))
    got = classify(
        past(prompt + [40, 42], prompt=12),
        prompt + [41, 42, 30],
        "m",
        True,
        12,
        BS,
        KIND,
        lambda ids: "".join(pieces.get(i, f"t{i}") for i in ids),
    )
    assert (got.reason, got.first_change) == ("reply_retokenized", 12)


def test_a_tool_call_rendered_in_other_text_is_tool_call_rerendered() -> None:
    """The model wrote `<tool_call>{"name"...`; the call came back and was rendered `<tool_call>\\n{"name"...`:
    the first change lies inside the call, an opened `<tool_call>` before it."""
    pieces = {50: "<tool_call>", 51: '{"name"', 52: "\n", 53: "</tool_call>", 54: "Sure."}
    text = lambda ids: "".join(pieces.get(i, f"t{i}") for i in ids)  # noqa: E731
    prompt = list(range(10, 22))
    got = classify(
        past(prompt + [50, 51, 53], prompt=12), prompt + [50, 52, 51, 53], "m", True, 12, BS, KIND, text
    )
    assert (got.reason, got.first_change, got.retokenized) == ("tool_call_rerendered", 13, None)
    edited = classify(
        past(prompt + [50, 51, 53], prompt=12), prompt + [50, 52, 51, 53], "m", True, 12, BS, KIND, text, True
    )
    assert edited.reason == "messages_changed"  # the client sent the call back changed: its own edit
    after = classify(
        past(prompt + [50, 51, 53, 54], prompt=12), prompt + [50, 51, 53, 52], "m", True, 12, BS, KIND, text
    )
    assert after.reason == "messages_changed"  # after the call closed: the text around it changed
