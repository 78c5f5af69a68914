"""OpenAI Responses API requests -> `ChatRequest`, as Codex and the OpenAI Agents SDK send them.

`input` (a string, or items: messages with `developer` / `system` / `user` / `assistant` roles and text
parts, `function_call` and `function_call_output` items; `reasoning` items accepted and not rendered),
`instructions` and function tools are read by the trace parser (engine/traces/responses.py), so a recorded
body replays to the same tokens. Tools a provider runs or groups itself (`web_search`, `namespace`,
`file_search`, ...) are accepted and not offered to the model: the `kvtestbed` object lists them
(`tools_not_offered`). `previous_response_id` continues a response this server keeps
(engine/serve/response_store.py): its conversation comes first (the record keeps the body as sent and
refers to that conversation: engine/serve/recorded_body.py); it is only found by the client identity that
made it (a 404 for anyone else, as for an unknown id). What asks a hosted model for something a local
one does not do (`reasoning`, `include`, `text.verbosity`) is accepted and noted in `not_applied`; fields
that change nothing here are accepted; what would change the answer in a way this engine does not
implement is refused by name, and so are unknown fields, as OpenAI refuses them.
"""

from __future__ import annotations

from typing import Any

from engine.serve import fields
from engine.serve.chat_request import RESPONSES, ChatRequest, new_id
from engine.serve.client_session import client_session
from engine.serve.errors import APIError, field_error
from engine.serve.openai_request import served_model, tool_choice
from engine.serve.response_store import ResponseStore
from engine.traces.request import FieldError
from engine.traces.responses import CALLS, OUTPUTS, hosted_tools, parse_responses

NO_EFFECT = (
    "store",  # whether this server keeps the response for previous_response_id (it does unless false)
    "metadata",
    "user",
    "safety_identifier",
    "service_tier",
    "prompt_cache_key",
    "prompt_cache_retention",
    "client_metadata",
    "stream_options",
)
# name -> (the values that change nothing, why others are refused)
REFUSED: dict[str, tuple[tuple[Any, ...], str]] = {
    "parallel_tool_calls": ((None, True), "every call the model writes is returned"),
    "truncation": ((None, "disabled"), "prompts are never truncated"),
    "background": ((None, False), "no background responses"),
    "max_tool_calls": ((None,), "every call the model writes is returned"),
    "top_logprobs": ((None, 0), "log probabilities are not returned"),
    "conversation": ((None,), "no server-side conversations (send input, or previous_response_id)"),
    "prompt": ((None,), "no stored prompt templates"),
}
KNOWN = {
    *NO_EFFECT,
    *REFUSED,
    "model",
    "input",
    "instructions",
    "tools",
    "tool_choice",
    "max_output_tokens",
    "temperature",
    "top_p",
    "stream",
    "reasoning",
    "include",
    "text",
    "previous_response_id",
}


def parse_responses_request(
    body: dict[str, Any], headers: Any, names: list[str], kept: ResponseStore
) -> ChatRequest:
    fields.refuse_unknown(body, KNOWN)
    model = served_model(body, names)
    for name, (allowed, why) in REFUSED.items():
        fields.only(body, name, allowed, why)
    fields.required(body, "input")
    notes: dict[str, Any] = {}
    client = client_session(
        headers, prompt_cache_key=fields.text(body, "prompt_cache_key"), user=fields.text(body, "user")
    )
    _check_items(input_items(body))
    _check_tool_types(body.get("tools"))
    previous = fields.text(body, "previous_response_id")
    if previous == "":
        raise APIError(
            400,
            "previous_response_id is empty: give a response's id, or leave it out",
            "previous_response_id",
        )
    if previous is not None:
        history = kept.get(previous, client.identity)
        if history is None:
            raise APIError(
                404,
                f"Previous response with id '{previous:.80}' not found: this server keeps its latest "
                "responses in memory for the client that made them, none made with store: false",
                "previous_response_id",
                "previous_response_not_found",
            )
        body = {k: v for k, v in body.items() if k != "previous_response_id"}
        body["input"] = history + input_items(body)
        notes["previous_response_id"] = {"id": previous, "items": len(history)}
    try:
        trace = parse_responses(body)
    except FieldError as e:
        raise field_error(e) from None
    choice = tool_choice(body)
    hosted = hosted_tools(body)
    if hosted:
        notes["tools_not_offered"] = hosted
    not_applied = _not_applied(body)
    if not_applied:
        notes["not_applied"] = not_applied
    fields.boolean(body, "store", True)
    return ChatRequest(
        api=RESPONSES,
        model=model,
        messages=trace.messages,
        tools=trace.tools,
        parse_tools=bool(trace.tools) and choice != "none",
        max_tokens=fields.integer(body, "max_output_tokens", 1),
        temperature=fields.number(body, "temperature", 0.0, 2.0, 1.0),
        top_p=fields.number(body, "top_p", 0.0, 1.0, 1.0, open_low=True),
        seed=None,
        stop=[],
        stream=fields.boolean(body, "stream", False),
        include_usage=True,
        body=body,
        client=client,
        request_id=new_id("resp_"),
        clamp_max_tokens=True,
        default_max_tokens=False,  # OpenAI sets no default: a reply may run to the context's end
        notes=notes,
    )


def input_items(body: dict[str, Any]) -> list[Any]:
    """`input` as a list of items (a string is one user message); anything else is refused."""
    raw = body.get("input")
    if isinstance(raw, str):
        return [{"type": "message", "role": "user", "content": raw}]
    if not isinstance(raw, list):
        raise APIError(400, f"input must be a string or a list of items, got {type(raw).__name__}", "input")
    return list(raw)


def _check_items(items: list[Any]) -> None:
    """What Chat Completions refuses in its messages, refused in the items that stand for them (the trace
    parser reads what clients logged, and takes more): a message without content, a call without a string
    `call_id` or (a function call) without string `arguments`, an output without a `call_id` or its `output`."""
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            continue  # the trace parser names it
        kind, where = item.get("type", "message"), f"input[{i}]"
        if kind == "message" and item.get("content") is None:
            raise APIError(
                400,
                f"{where}.content: a message needs content (a string or a list of parts)",
                f"{where}.content",
            )
        if kind in CALLS or kind in OUTPUTS:
            call_id = item.get("call_id")
            if not isinstance(call_id, str) or not call_id:
                got = "none" if call_id is None else f"{type(call_id).__name__} {call_id!r:.40}"
                raise APIError(
                    400,
                    f"{where}.call_id: a {kind} item needs a string call_id, got {got}",
                    f"{where}.call_id",
                )
        if kind == "function_call" and not isinstance(item.get("arguments"), str):
            got = item.get("arguments")
            raise APIError(
                400, f"{where}.arguments: must be a JSON string, got {got!r:.40}", f"{where}.arguments"
            )
        if kind in OUTPUTS and not isinstance(item.get("output"), str | list):
            got = item.get("output")
            raise APIError(
                400,
                f"{where}.output: must be a string or a list of parts, got {got!r:.40}",
                f"{where}.output",
            )


def _check_tool_types(tools: Any) -> None:
    """Every tool says what it is: one without `type` would be taken for a hosted tool and not offered."""
    for j, tool in enumerate(tools if isinstance(tools, list) else []):
        if isinstance(tool, dict) and not isinstance(tool.get("type"), str):
            raise APIError(
                400, f"tools[{j}].type: required ('function' for a function tool)", f"tools[{j}].type"
            )


def _not_applied(body: dict[str, Any]) -> dict[str, str]:
    """What the request asks of a hosted model that a local one does not do: field -> why."""
    notes = {}
    reasoning = fields.mapping(body, "reasoning")
    for key in sorted(k for k, v in reasoning.items() if v is not None):
        notes[f"reasoning.{key}"] = f"{reasoning[key]!r:.40}: the model is not asked to reason first"
    include = body.get("include")
    if include is not None and not (isinstance(include, list) and all(isinstance(i, str) for i in include)):
        raise APIError(400, f"include must be a list of strings, got {include!r:.60}", "include")
    if include:
        notes["include"] = f"{', '.join(include):.120}: nothing of it is produced (no reasoning, no logprobs)"
    text = fields.mapping(body, "text")
    fields.refuse_unknown(text, ("format", "verbosity"), "text")
    kind = fields.mapping({"text.format": text.get("format")}, "text.format").get("type", "text")
    if kind != "text":
        raise APIError(
            400, f"text.format.type={kind!r:.40} is not implemented: only text output", "text.format.type"
        )
    if text.get("verbosity") is not None:
        notes["text.verbosity"] = f"{text['verbosity']!r:.40}: no verbosity control on a local model"
    return notes
