"""OpenAI Chat Completions requests -> `ChatRequest`.

Messages and tools are read by the trace parser (engine/traces/openai_chat.py: string or text-part content,
`developer` as system, tool messages, tool calls with JSON-string arguments), so a recorded body replays to
the same tokens. Fields that would change the answer in ways this engine does not implement are refused by
name at any value but the one that changes nothing; `reasoning_effort` and `verbosity` (which the Agents SDK
sends) are accepted and noted in the `kvtestbed` object's `not_applied`; `continue_final_message` (vLLM's
flag) continues a last assistant message instead of answering after it. Unknown fields are refused, as
OpenAI refuses them.
"""

from __future__ import annotations

from typing import Any

from engine.arguments import SEED_MAX
from engine.serve import fields
from engine.serve.chat_request import OPENAI, ChatRequest, new_id
from engine.serve.client_session import client_session
from engine.serve.errors import APIError, field_error
from engine.traces.openai_chat import parse_chat_completions
from engine.traces.request import FieldError

SAMPLING = (
    "model",
    "messages",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "seed",
    "stop",
)
NO_EFFECT = ("user", "metadata", "store", "service_tier", "prompt_cache_key", "safety_identifier")
# name -> (the values that change nothing, why others are refused)
REFUSED: dict[str, tuple[tuple[Any, ...], str]] = {
    "n": ((1, None), "one choice per request"),
    "logit_bias": ((None, {}), "logit biases are not applied"),
    "presence_penalty": ((None, 0, 0.0), "no repetition penalties"),
    "frequency_penalty": ((None, 0, 0.0), "no repetition penalties"),
    "logprobs": ((None, False), "log probabilities are not returned"),
    "top_logprobs": ((None, 0), "log probabilities are not returned"),
    "response_format": ((None, {"type": "text"}), "only text output (no JSON mode or schemas)"),
    "modalities": ((None, ["text"]), "text only"),
    "audio": ((None,), "text only"),
    "parallel_tool_calls": ((None, True), "every call the model writes is returned"),
    "prediction": ((None,), "no predicted outputs"),
    "web_search_options": ((None,), "no web search"),
    "functions": ((None,), "use tools (the deprecated functions field is not read)"),
    "function_call": ((None,), "use tool_choice"),
}
NOT_APPLIED = {  # accepted and noted in the kvtestbed object's `not_applied`: the Agents SDK sends both
    "reasoning_effort": "no reasoning control on a local model",
    "verbosity": "no verbosity control on a local model",
}
KNOWN = {
    *SAMPLING,
    *NO_EFFECT,
    *REFUSED,
    *NOT_APPLIED,
    "tools",
    "tool_choice",
    "stream",
    "stream_options",
    "continue_final_message",
}


def served_model(body: dict[str, Any], names: list[str]) -> str:
    model = fields.required(body, "model")
    if not isinstance(model, str) or model not in names:
        raise APIError(
            404,
            f"The model `{model}` does not exist here; this server serves {', '.join(names)}",
            "model",
            "model_not_found",
        )
    return model


def tool_choice(body: dict[str, Any]) -> Any:
    """OpenAI's `tool_choice` (both APIs): absent, `auto` or `none`; any other is refused."""
    choice = body.get("tool_choice")
    if choice not in (None, "auto", "none"):
        raise APIError(
            400, f"tool_choice={choice!r:.60} is not implemented: only 'auto' and 'none'", "tool_choice"
        )
    return choice


def required_message_fields(messages: list[dict[str, Any]]) -> None:
    """What OpenAI requires of a message that the trace parser (shared with bench replay, which reads what
    clients logged) lets default: content, except on an assistant message with tool calls; a tool message's
    tool_call_id."""
    for i, m in enumerate(messages):
        if m.get("content") is None and not (m["role"] == "assistant" and m.get("tool_calls")):
            raise APIError(
                400, f"messages[{i}].content is required for role {m['role']!r}", f"messages[{i}].content"
            )
        if m["role"] == "tool" and not isinstance(m.get("tool_call_id"), str):
            raise APIError(
                400,
                f"messages[{i}].tool_call_id (a string) is required for role 'tool'",
                f"messages[{i}].tool_call_id",
            )


def parse_openai(body: dict[str, Any], headers: Any, names: list[str]) -> ChatRequest:
    fields.refuse_unknown(body, KNOWN)
    model = served_model(body, names)
    for name, (allowed, why) in REFUSED.items():
        fields.only(body, name, allowed, why)
    fields.required(body, "messages")
    try:
        trace = parse_chat_completions(body)
    except FieldError as e:
        raise field_error(e) from None
    required_message_fields(body["messages"])
    choice = tool_choice(body)
    max_tokens = fields.integer(body, "max_completion_tokens", 1, fields.integer(body, "max_tokens", 1))
    if body.get("max_tokens") not in (None, max_tokens):
        raise APIError(400, "max_tokens and max_completion_tokens differ; send one", "max_tokens")
    stream = fields.boolean(body, "stream", False)
    options = fields.mapping(body, "stream_options")
    if options and not stream:
        raise APIError(400, "stream_options is only allowed with stream: true", "stream_options")
    fields.refuse_unknown(options, ("include_usage", "include_obfuscation"), "stream_options")
    client = client_session(
        headers, prompt_cache_key=fields.text(body, "prompt_cache_key"), user=fields.text(body, "user")
    )
    continue_final = fields.boolean(body, "continue_final_message", False)
    last = trace.messages[-1]
    if continue_final and (last["role"] != "assistant" or last.get("tool_calls")):
        raise APIError(
            400,
            "continue_final_message needs an assistant message with text (no tool calls) last",
            "continue_final_message",
        )
    notes = {
        name: f"{body[name]!r:.40}: {why}" for name, why in NOT_APPLIED.items() if body.get(name) is not None
    }
    return ChatRequest(
        api=OPENAI,
        model=model,
        messages=trace.messages,
        tools=trace.tools,
        parse_tools=bool(trace.tools) and choice != "none",
        max_tokens=max_tokens,
        temperature=fields.number(body, "temperature", 0.0, 2.0, 1.0),
        top_p=fields.number(body, "top_p", 0.0, 1.0, 1.0, open_low=True),
        seed=fields.integer(body, "seed", 0, maximum=SEED_MAX),
        stop=fields.strings(body.get("stop"), "stop", limit=4),
        stream=stream,
        include_usage=fields.boolean(options, "include_usage", False),
        body=body,
        client=client,
        request_id=new_id("chatcmpl-"),
        continue_final=continue_final,
        notes={"not_applied": notes} if notes else {},
    )
