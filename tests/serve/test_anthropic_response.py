"""Anthropic bodies and streams, validated by the `anthropic` SDK's own types and its stream accumulator."""

from __future__ import annotations

from anthropic.lib.streaming._messages import accumulate_event
from anthropic.types import Message, RawMessageStreamEvent
from pydantic import TypeAdapter

from engine.serve import anthropic_response
from engine.serve.chat_request import ANTHROPIC
from tests.serve.responses import CALL, CALL_DELTAS, by_event, collect, events, finished, replay, request

EVENT = TypeAdapter(RawMessageStreamEvent)


def test_usage_excludes_the_cache_from_input_tokens() -> None:
    fin = finished("Hi", prompt=40, cached=16)  # 2 full blocks: 1 read, 1 written; 8 tokens past them
    usage = anthropic_response.usage(fin)
    assert usage == {
        "input_tokens": 8,
        "cache_creation_input_tokens": 16,
        "cache_read_input_tokens": 16,
        "output_tokens": 12,
    }
    # a block-aligned prompt, all cached: its last block is recomputed (for its logits), not written
    aligned = anthropic_response.usage(finished("Hi", prompt=32, cached=16, written=0))
    assert (aligned["cache_creation_input_tokens"], aligned["input_tokens"]) == (0, 16)


def test_a_tool_use_body_and_a_stop_sequence() -> None:
    body = Message.model_validate(
        anthropic_response.message(request(ANTHROPIC, stream=False), finished("Checking.\n" + CALL))
    )
    assert body.stop_reason == "tool_use" and [b.type for b in body.content] == ["text", "tool_use"]
    assert body.content[1].input == {"city": "Paris"} and body.content[1].id.startswith("toolu_")
    stopped = anthropic_response.message(
        request(ANTHROPIC, stop=["END"], tools=False), finished("ok", "okEND")
    )
    assert (stopped["stop_reason"], stopped["stop_sequence"]) == ("stop_sequence", "END")
    cut = anthropic_response.message(request(ANTHROPIC, tools=False), finished("ok", reason="length"))
    assert cut["stop_reason"] == "max_tokens"


def test_a_stream_accumulates_to_the_same_message() -> None:
    recorded = []
    fin = finished("Checking.\n" + CALL)
    pieces = ["Check", "ing.\n", "<tool_call>", CALL[11:]]
    sent = collect(
        anthropic_response.stream(
            request(ANTHROPIC), replay(events(pieces, fin)), lambda *e: recorded.append(e), block_size=16
        )
    )
    names = [name for name, _ in sent]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    snapshot, buffers = None, {}
    for _, data in sent:
        snapshot = accumulate_event(
            event=EVENT.validate_python(data), current_snapshot=snapshot, json_bufs=buffers
        )
    assert [b.type for b in snapshot.content] == ["text", "tool_use"] and snapshot.content[
        0
    ].text == "Checking."
    assert snapshot.content[1].input == {"city": "Paris"} and snapshot.stop_reason == "tool_use"
    assert snapshot.usage.cache_read_input_tokens == 16 and snapshot.usage.output_tokens == 12
    assert sent[-2][1]["kvtestbed"]["cached_tokens"] == 16 and recorded


def test_an_empty_answer_has_no_content_block() -> None:
    fin = finished("")
    sent = collect(
        anthropic_response.stream(
            request(ANTHROPIC, tools=False), replay(events([], fin)), lambda *e: None, block_size=16
        )
    )
    assert [name for name, _ in sent] == ["message_start", "message_delta", "message_stop"]


def test_a_tool_use_block_streams_as_it_forms() -> None:
    """Its block starts with the name once the name is read, then `input_json_delta` fragments."""
    fin = finished(CALL)
    sent = by_event(
        lambda e: anthropic_response.stream(request(ANTHROPIC), e, lambda *r: None, block_size=16),
        events(CALL_DELTAS, fin),
    )
    assert sent[1].startswith("event: content_block_start") and '"name": "get_weather"' in sent[1]
    assert "input_json_delta" in sent[2] and '\\"Pa' in sent[2]
    snapshot, buffers = None, {}
    for block in "".join(sent).strip().split("\n\n"):
        data = block.split("data: ", 1)[1]
        event = EVENT.validate_json(data)
        snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=buffers)
    assert [b.type for b in snapshot.content] == ["tool_use"] and snapshot.stop_reason == "tool_use"
    assert snapshot.content[0].name == "get_weather" and snapshot.content[0].input == {"city": "Paris"}
