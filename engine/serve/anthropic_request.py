"""Anthropic Messages requests -> `ChatRequest`.

`system` (a string or text blocks), `text` / `tool_use` / `tool_result` content blocks, system messages
mid-conversation and tools with `input_schema` are read by the trace parser
(engine/traces/anthropic_messages.py), so a recorded body replays to the same tokens; `cache_control` markers
are accepted (the local cache is automatic: every full block is cached, breakpoints or not). A conversation
that ends with assistant text is a prefill: the answer continues it. What Claude Code sends for a hosted
model (`thinking` of every type, `context_management`, `output_config`) is accepted and noted in the
`kvtestbed` object's `not_applied`: nothing of it is done on a local model. Unknown fields are refused, as
the API refuses them.
"""

from __future__ import annotations

from typing import Any

from engine.serve import fields
from engine.serve.chat_request import ANTHROPIC, ChatRequest, new_id
from engine.serve.client_session import client_session
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
    "context_management",
    "output_config",
}
THINKING = ("enabled", "adaptive", "disabled")


def parse_messages(body: dict[str, Any], headers: Any, names: list[str]) -> ChatRequest:
    fields.refuse_unknown(body, KNOWN)
    model = served_model(body, names)
    fields.required(body, "messages")
    max_tokens = fields.integer(body, "max_tokens", 1)
    if max_tokens is None:
        raise APIError(400, "max_tokens: field required", "max_tokens")
    fields.only(body, "top_k", (None,), "no top-k sampling (use top_p)")
    notes = _not_applied(body)
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
    user_id = fields.text({"metadata.user_id": metadata.get("user_id")}, "metadata.user_id")
    client = client_session(headers, user_id=user_id)
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
        client=client,
        request_id=new_id("msg_"),
        continue_final=trace.continue_final,
        clamp_max_tokens=True,
        notes={"not_applied": notes} if notes else {},
    )


def _not_applied(body: dict[str, Any]) -> dict[str, str]:
    """What the request asks of a hosted model that a local one does not do: field -> why."""
    notes = {}
    thinking = fields.mapping(body, "thinking")
    kind = thinking.get("type", "disabled") if thinking else "disabled"
    if kind not in THINKING:
        raise APIError(
            400, f"thinking.type must be one of {', '.join(THINKING)}, got {kind!r:.40}", "thinking.type"
        )
    if kind == "enabled":
        budget = {"thinking.budget_tokens": thinking.get("budget_tokens")}
        if fields.integer(budget, "thinking.budget_tokens", 1) is None:
            raise APIError(
                400, "thinking.budget_tokens: field required with type enabled", "thinking.budget_tokens"
            )
    if kind != "disabled":
        notes["thinking"] = f"{kind}: the model is not asked to think first (no thinking blocks are sent)"
    if fields.mapping(body, "context_management"):
        notes["context_management"] = "no context edits: the conversation is rendered as sent"
    config = fields.mapping(body, "output_config")
    if "effort" in config:
        notes["output_config.effort"] = f"{config['effort']!r:.40}: no effort control on a local model"
    if "format" in config:
        notes["output_config.format"] = (
            "the output is not constrained to the format: it is what the model writes"
        )
    for key in sorted(set(config) - {"effort", "format"}):
        notes[f"output_config.{key}"] = "not applied"
    return notes
