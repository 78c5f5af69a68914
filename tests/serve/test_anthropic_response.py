"""Anthropic bodies and streams, validated by the `anthropic` SDK's own types and its stream accumulator."""

from __future__ import annotations

from typing import Any

import anthropic
from anthropic.lib.streaming._messages import accumulate_event
from anthropic.types import Message, RawMessageStreamEvent
from pydantic import TypeAdapter

from engine.serve import anthropic_response
from engine.serve.chat_request import ANTHROPIC
from tests.serve.clients import BLOCK, GREEDY, MODEL, anthropic_client
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
    # the final message keeps message_start's admission-time `kvtestbed`; the whole one is on message_delta
    assert snapshot.model_extra["kvtestbed"] == {"cached_tokens": 16, "complete": False}
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


def _stream(client: anthropic.Anthropic, messages: list[dict], options: dict) -> tuple[Any, Any, Any]:
    """message_start, message_delta and the SDK's final message of one streamed request."""
    with client.messages.stream(messages=messages, max_tokens=8, **options) as stream:
        sent = {e.type: e for e in stream if e.type in ("message_start", "message_delta")}
        final = stream.get_final_message()
    return sent["message_start"], sent["message_delta"], final


def test_the_sdks_final_message_keeps_the_admission_report(smollm2_server) -> None:
    """Through the real SDK and server: `create` returns the whole `kvtestbed` object; a stream's final
    message holds message_start's admission-time object (equal to the whole one where both have a field) and
    the final usage, exact; message_delta carries the whole object."""
    client = anthropic_client(smollm2_server)
    options = {
        "model": MODEL,
        "system": "Final desk.",
        "metadata": {"user_id": "final"},
        "extra_body": GREEDY,
    }
    messages = [{"role": "user", "content": "Name one primary colour."}]
    whole = client.messages.create(messages=messages, max_tokens=8, **options).model_extra["kvtestbed"]
    assert "complete" not in whole and whole["session_source"] == "metadata.user_id"
    start, delta, final = _stream(client, messages, options)
    admitted, report = final.model_extra["kvtestbed"], delta.model_extra["kvtestbed"]
    assert admitted == start.message.model_extra["kvtestbed"] and admitted.pop("complete") is False
    assert admitted == {key: report[key] for key in admitted} and "complete" not in report
    assert admitted["previous_request_id"] == whole["request_id"] and admitted["cached_tokens"] > 0
    assert report["miss_reason"] is None and report["completion_tokens"] == final.usage.output_tokens
    assert final.usage.cache_read_input_tokens == report["cached_tokens"]
    assert final.usage.cache_creation_input_tokens == report["cache_written_tokens"]


def test_message_start_expects_a_write_that_an_equal_cached_block_saves(smollm2_server) -> None:
    """A block-aligned prompt sent again: its last block is recomputed for its logits but cached already, so
    message_start's expected write (one block) is more than message_delta's exact one (none)."""
    client = anthropic_client(smollm2_server)
    options = {
        "model": MODEL,
        "system": "Aligned desk.",
        "metadata": {"user_id": "aligned"},
        "extra_body": GREEDY,
    }
    for words in range(BLOCK * 2):  # one word more is one token more: some count is block-aligned
        messages = [{"role": "user", "content": "Say yes" + " yes" * words + "."}]
        prompt = client.messages.count_tokens(model=MODEL, system="Aligned desk.", messages=messages)
        if prompt.input_tokens % BLOCK == 0:
            break
    assert prompt.input_tokens % BLOCK == 0
    first_start, first_delta, _ = _stream(client, messages, options)
    assert (
        first_start.message.usage.cache_creation_input_tokens == first_delta.usage.cache_creation_input_tokens
    )
    start, delta, final = _stream(client, messages, options)
    assert start.message.usage.cache_read_input_tokens == prompt.input_tokens - BLOCK
    assert (start.message.usage.cache_creation_input_tokens, delta.usage.cache_creation_input_tokens) == (
        BLOCK,
        0,
    )
    assert final.usage.cache_creation_input_tokens == 0 and final.usage.input_tokens == BLOCK
