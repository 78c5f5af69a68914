"""OpenAI bodies and streams, validated by the `openai` SDK's own types and its stream accumulator."""

from __future__ import annotations

import json

from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from engine.serve import openai_response
from tests.serve.responses import CALL, CALL_DELTAS, by_event, collect, events, finished, replay, request

RECORDED: list[tuple] = []


def record(*entry: object) -> None:
    RECORDED.append(entry)


def test_a_tool_call_body() -> None:
    fin = finished("Checking.\n" + CALL)
    body = ChatCompletion.model_validate(openai_response.completion(request(stream=False), fin))
    call = body.choices[0].message.tool_calls[0]
    assert body.choices[0].finish_reason == "tool_calls" and body.choices[0].message.content == "Checking."
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Paris"}
    assert body.usage.prompt_tokens == 40 and body.usage.prompt_tokens_details.cached_tokens == 16
    assert body.model_extra["kvtestbed"]["cached_tokens"] == 16


def test_a_stream_accumulates_to_the_same_answer() -> None:
    fin = finished("Checking.\n" + CALL)
    pieces = ["Check", "ing.\n<tool", "_call>\n", CALL[12:]]
    sent = collect(openai_response.stream(request(), replay(events(pieces, fin)), record))
    assert sent[-1] == (None, "[DONE]") and RECORDED[-1][2]["prompt_tokens"] == 40
    state = ChatCompletionStreamState()
    for _, data in sent[:-1]:
        state.handle_chunk(ChatCompletionChunk.model_validate(data))
    final = state.get_final_completion()
    message = final.choices[0].message
    assert message.content == "Checking." and message.tool_calls[0].function.name == "get_weather"
    assert (
        final.choices[0].finish_reason == "tool_calls"
        and final.usage.prompt_tokens_details.cached_tokens == 16
    )
    assert sent[-2][1]["choices"] == [] and sent[-2][1]["kvtestbed"]["cached_tokens"] == 16  # the usage chunk


def test_a_stop_sequence_ends_a_stream_before_it() -> None:
    fin = finished("The answer is 4", full_text="The answer is 4###", reason="stop")
    req = request(stop=["###"], tools=False)
    req.include_usage = False
    sent = collect(openai_response.stream(req, replay(events(["The answer", " is 4#", "##"], fin)), record))
    text = "".join(d["choices"][0]["delta"].get("content", "") for _, d in sent[:-1] if d["choices"])
    assert text == "The answer is 4"
    assert sent[-2][1]["choices"][0]["finish_reason"] == "stop" and "kvtestbed" in sent[-2][1]


def test_a_call_streams_as_it_forms() -> None:
    """Nothing at admission; the role chunk with the first delta, which completes the name: its id and name in
    the chunk after it; then argument fragments."""
    fin = finished(CALL)
    sent = by_event(lambda e: openai_response.stream(request(), e, record), events(CALL_DELTAS, fin))
    opening, named_chunk = sent[1].strip().split("\n\n")
    assert sent[0] == "" and json.loads(opening.removeprefix("data: "))["choices"][0]["delta"] == {
        "role": "assistant",
        "content": "",
    }
    named = json.loads(named_chunk.removeprefix("data: "))["choices"][0]["delta"]["tool_calls"][0]
    assert named["function"] == {"name": "get_weather", "arguments": ""} and named["id"].startswith("call_")
    assert '{\\"city\\": \\"Pa' in sent[2]  # a fragment of the arguments, before the call has closed
    state = ChatCompletionStreamState()
    for block in "".join(sent).strip().split("\n\n")[:-1]:
        state.handle_chunk(ChatCompletionChunk.model_validate_json(block.removeprefix("data: ")))
    final = state.get_final_completion().choices[0]
    call = final.message.tool_calls[0]
    assert (call.id, call.function.name) == (
        named["id"],
        "get_weather",
    ) and final.finish_reason == "tool_calls"
    assert json.loads(call.function.arguments) == {"city": "Paris"} and not final.message.content
