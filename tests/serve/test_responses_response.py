"""Responses API bodies and streams, validated by the `openai` SDK's own types and its stream accumulator:
the documented event order, sequence numbers, the same output items streamed or whole, incomplete replies,
and the responses kept for previous_response_id."""

from __future__ import annotations

import itertools
import json

from openai import omit
from openai._models import construct_type_unchecked
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.responses import Response, ResponseStreamEvent

from engine.serve import responses_response
from engine.serve.response_store import ResponseStore
from engine.serve.streaming import KeepAlive
from tests.serve.responses import CALL, CALL_DELTAS, by_event, collect, events, finished, replay, request

RECORDED: list[tuple] = []


def record(*entry: object) -> None:
    RECORDED.append(entry)


def test_a_tool_call_response() -> None:
    kept = ResponseStore()
    req = request(stream=False)
    req.body = {"input": "hi"}
    body = Response.model_validate(responses_response.response(req, finished("Checking.\n" + CALL), kept))
    message, call = body.output
    assert body.status == "completed" and body.id == "id-1" and body.incomplete_details is None
    assert message.type == "message" and message.content[0].text == "Checking."
    assert call.type == "function_call" and call.name == "get_weather" and call.call_id.startswith("call_")
    assert json.loads(call.arguments) == {"city": "Paris"}
    assert body.usage.input_tokens == 40 and body.usage.input_tokens_details.cached_tokens == 16
    assert body.model_extra["kvtestbed"]["cached_tokens"] == 16
    conversation = kept.get("id-1", "anonymous")  # what previous_response_id continues: input, output
    assert conversation[0]["content"] == "hi" and [i["type"] for i in conversation[1:]] == [
        "message",
        "function_call",
    ]


def test_a_cut_reply_is_incomplete_and_store_false_is_not_kept() -> None:
    kept = ResponseStore()
    req = request(stream=False, tools=False)
    req.body = {"input": "hi", "store": False}
    body = Response.model_validate(
        responses_response.response(req, finished("The answer", reason="length"), kept)
    )
    assert body.status == "incomplete" and body.incomplete_details.reason == "max_output_tokens"
    assert body.output[0].status == "incomplete" and body.output[0].content[0].text == "The answer"
    assert kept.get("id-1", "anonymous") is None


def test_a_stream_in_the_documented_order_accumulates_to_the_same_response() -> None:
    kept = ResponseStore()
    req = request()
    req.body = {"input": "hi"}
    fin = finished("Checking.\n" + CALL)
    pieces = ["Check", "ing.\n<tool", "_call>\n", CALL[12:]]
    items = events(pieces, fin)
    items[1:1] = [KeepAlive()]  # after the admission (response.created): a keepalive event
    sent = collect(responses_response.stream(req, replay(items), record, kept))
    kinds = [name for name, _ in itertools.groupby(name for name, _ in sent)]  # runs of deltas as one
    assert kinds == [
        "response.created",
        "response.in_progress",
        "keepalive",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [data["sequence_number"] for _, data in sent] == list(range(len(sent)))
    assert all(data["type"] == name for name, data in sent)
    state = ResponseStreamState(input_tools=omit, text_format=omit)
    for _, data in sent:  # as the SDK reads a stream (an unknown type, the keepalive, constructs as is)
        state.handle_event(construct_type_unchecked(type_=ResponseStreamEvent, value=data))
    final = sent[-1][1]["response"]
    streamed = Response.model_validate(final)
    assert streamed.output[0].content[0].text == "Checking." and streamed.output[1].name == "get_weather"
    assert final["usage"]["input_tokens_details"]["cached_tokens"] == 16 and final["kvtestbed"]
    assert RECORDED[-1][2]["input_tokens"] == 40
    whole_req = request(stream=False)
    whole_req.body = req.body
    whole = responses_response.response(whole_req, fin, kept)
    shape = [(i["type"], i.get("name"), i.get("arguments")) for i in whole["output"]]
    assert [(i["type"], i.get("name"), i.get("arguments")) for i in final["output"]] == shape


def test_created_goes_out_at_admission_and_arguments_as_they_form() -> None:
    fin = finished(CALL, reason="length")
    req = request()
    req.body = {"input": "hi"}
    sent = by_event(
        lambda e: responses_response.stream(req, e, record, ResponseStore()), events(CALL_DELTAS, fin)
    )
    assert "event: response.created" in sent[0] and "event: response.in_progress" in sent[0]
    assert '"name": "get_weather"' in sent[1] and "response.output_item.added" in sent[1]
    assert "response.function_call_arguments.delta" in sent[2] and '{\\"city\\": \\"Pa' in sent[2]
    assert "response.completed" in sent[-1]  # a call that closed: cut or not, the reply is its call
