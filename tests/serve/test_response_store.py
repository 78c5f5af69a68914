"""The response store: kept per client identity, bounded by count and by the bytes of what it holds,
unrendered items not kept."""

from __future__ import annotations

from engine.serve.response_store import ResponseStore

MESSAGE = {"type": "message", "role": "user", "content": "hi"}


def test_a_response_is_found_only_by_its_owner() -> None:
    kept = ResponseStore()
    kept.keep("r1", "key:a", [MESSAGE])
    assert kept.get("r1", "key:a") == [MESSAGE]
    assert kept.get("r1", "key:b") is None and kept.get("r1", "anonymous") is None
    assert kept.get("r2", "key:a") is None


def test_reasoning_items_are_not_kept() -> None:
    kept = ResponseStore()
    reasoning = {"type": "reasoning", "summary": [], "encrypted_content": "x" * 100_000}
    kept.keep("r1", "anonymous", [reasoning, MESSAGE, {"type": "web_search_call"}] * 50)
    assert kept.get("r1", "anonymous") == [MESSAGE] * 50
    assert kept.bytes < 3_000


def test_bounded_by_bytes_the_newest_always_kept() -> None:
    kept = ResponseStore(capacity=100, max_bytes=10_000)
    big = [{"type": "message", "role": "user", "content": "x" * 3_000}]
    for n in range(10):
        kept.keep(f"r{n}", "anonymous", big)
        assert kept.bytes <= 10_000
    assert list(kept.items) == ["r7", "r8", "r9"]
    kept.keep("huge", "anonymous", big * 10)  # over the bound alone: kept, everything older forgotten
    assert list(kept.items) == ["huge"] and kept.get("huge", "anonymous") == big * 10
    assert kept.bytes == len(kept.items["huge"].conversation)


def test_bounded_by_count() -> None:
    kept = ResponseStore(capacity=2)
    for n in range(3):
        kept.keep(f"r{n}", "anonymous", [])
    assert list(kept.items) == ["r1", "r2"] and kept.bytes == 4
