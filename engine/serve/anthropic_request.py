"""Anthropic Messages requests -> `ChatRequest`.

`system` (a string or text blocks), `text` / `tool_use` / `tool_result` content blocks and tools with
`input_schema` are read by the trace parser (engine/traces/anthropic_messages.py), so a recorded body
replays to the same tokens; `cache_control` markers are accepted (the local cache is automatic: every full
block is cached, breakpoints or not). Unknown fields are refused, as the API refuses them.
"""

from __future__ import annotations

from typing import Any

from engine.serve import fields
from engine.serve.chat_request import ANTHROPIC, ChatRequest, explicit_session, new_id
from engine.serve.errors import APIError, field_error
from engine.serve.openai_request import served_model
from engine.traces.anthropic_messages import parse_anthropic
from engine.traces.request import FieldError

KNOWN = {
    "model",
    "messages",
    "max_tokens",
    "system",
    "stop_sequences",
    "stream",
    "temperature",
    "top_p",
    "top_k",
    "tools",
    "tool_choice",
    "metadata",
    "cache_control",
    "service_tier",
    "thinking",
}


def parse_messages(body: dict[str, Any], headers: Any, names: list[str]) -> ChatRequest:
    fields.refuse_unknown(body, KNOWN)
    model = served_model(body, names)
    fields.required(body, "messages")
    max_tokens = fields.integer(body, "max_tokens", 1)
    if max_tokens is None:
        raise APIError(400, "max_tokens: field required", "max_tokens")
    fields.only(body, "top_k", (None,), "no top-k sampling (use top_p)")
    fields.only(body, "thinking", (None, {"type": "disabled"}), "no extended thinking")
    try:
        trace = parse_anthropic(body)
    except FieldError as e:
        raise field_error(e) from None
    choice = fields.mapping(body, "tool_choice")
    fields.refuse_unknown(choice, ("type", "disable_parallel_tool_use"), "tool_choice")
    if choice.get("type", "auto") not in ("auto", "none"):
        raise APIError(
            400,
            f"tool_choice.type={choice['type']!r:.40} is not implemented: only auto and none",
            "tool_choice.type",
        )
    if choice.get("disable_parallel_tool_use"):
        raise APIError(
            400,
            "disable_parallel_tool_use is not implemented: every call the model writes is returned",
            "tool_choice.disable_parallel_tool_use",
        )
    metadata = fields.mapping(body, "metadata")
    fields.refuse_unknown(metadata, ("user_id",), "metadata")
    session, source = explicit_session(headers, metadata.get("user_id"), "metadata.user_id")
    return ChatRequest(
        api=ANTHROPIC,
        model=model,
        messages=trace.messages,
        tools=trace.tools,
        parse_tools=bool(trace.tools) and choice.get("type") != "none",
        max_tokens=max_tokens,
        temperature=fields.number(body, "temperature", 0.0, 1.0, 1.0),
        top_p=fields.number(body, "top_p", 0.0, 1.0, 1.0, open_low=True),
        seed=None,
        stop=fields.strings(body.get("stop_sequences"), "stop_sequences", one_string=False),
        stream=fields.boolean(body, "stream", False),
        include_usage=True,
        body=body,
        session_id=session,
        session_source=source,
        request_id=new_id("msg_"),
    )
