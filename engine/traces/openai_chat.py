"""OpenAI Chat Completions request bodies (today's trace format) -> `TraceRequest` (messages + tools).

A request is a body (`messages`, optional `tools`, `model`) or a bare message list.

Accepted: `content` as a string, null (a message that is only tool calls) or a list of text parts (joined
with "\n"); the `developer` role (read as `system`, as templates know no other); `name` on tool messages;
tool calls whose `arguments` are JSON strings; `prompt_cache_key` and `prompt_cache_retention` (OpenAI's
cache routing key and retention policy) kept for the OpenAI rule; vLLM's `continue_final_message: true`
(the reply continues the last, assistant, message). Images, audio and files are refused by
name: the local tokenizer cannot count them.
"""

from __future__ import annotations

from typing import Any

from engine.prompts.messages import Message, tool_call
from engine.traces.fields import tool_arguments
from engine.traces.request import FieldError, TraceRequest, expect, function_tool

CHAT_ROLES = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
}
TEXT_PARTS = ("text", "input_text", "output_text", "refusal")
RETENTIONS = {"in_memory": "in_memory", "in-memory": "in_memory", "24h": "24h"}  # the SDKs write both
PART_JOIN = "\n"  # how every format joins a message's text parts/blocks: the same text in all of them


def parts_text(content: Any, field_path: str) -> str:
    """A string, null, or a list of text parts (`{"type": "text", "text": ...}`) as one string."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    texts = []
    for j, part in enumerate(expect(content, list, field_path)):
        where = f"{field_path}[{j}]"
        kind = expect(part, dict, where).get("type")
        if kind not in TEXT_PARTS:
            raise FieldError(
                f"{where}.type",
                f"{kind!r} parts are not supported (only text: the local tokenizer counts text)",
            )
        texts.append(expect(part.get("text", part.get("refusal")), str, f"{where}.text"))
    return PART_JOIN.join(texts)


def _message(m: Any, i: int) -> Message:
    where = f"messages[{i}]"
    role = CHAT_ROLES.get(expect(m, dict, where).get("role"))
    if role is None:
        raise FieldError(f"{where}.role", f"expected one of {', '.join(CHAT_ROLES)}, got {m.get('role')!r}")
    out: Message = {"role": role, "content": parts_text(m.get("content"), f"{where}.content")}
    if m.get("tool_calls"):
        calls = []
        for j, call in enumerate(expect(m["tool_calls"], list, f"{where}.tool_calls")):
            at = f"{where}.tool_calls[{j}]"
            fn = expect(expect(call, dict, at).get("function", call), dict, f"{at}.function")
            name = expect(fn.get("name"), str, f"{at}.function.name")
            arguments = tool_arguments(fn.get("arguments", {}), f"{at}.function.arguments")
            calls.append(tool_call(str(call.get("id", f"call_{i}_{j}")), name, arguments))
        out["tool_calls"] = calls
    if role == "tool":
        out["tool_call_id"] = str(m.get("tool_call_id", ""))
        if isinstance(m.get("name"), str):
            out["name"] = m["name"]
    return out


def parse_chat_completions(body: Any) -> TraceRequest:
    """One request: a Chat Completions body (`messages`, optional `tools`, `model`) or a bare message list."""
    if isinstance(body, list):
        body = {"messages": body}
    messages = expect(expect(body, dict, "request").get("messages"), list, "messages")
    if not messages:
        raise FieldError("messages", "empty: a request needs at least one message")
    tools = [_tool(t, j) for j, t in enumerate(expect(body.get("tools") or [], list, "tools"))]
    model = body.get("model")
    continue_final = body.get("continue_final_message") is True
    return TraceRequest(
        [_message(m, i) for i, m in enumerate(messages)],
        tools or None,
        model=model if isinstance(model, str) else None,
        continue_final=continue_final,
        **cache_hints(body),
    )


def cache_hints(body: dict[str, Any]) -> dict[str, str | None]:
    """OpenAI's `prompt_cache_key` and `prompt_cache_retention` of a Chat Completions or Responses body."""
    key, retention = body.get("prompt_cache_key"), body.get("prompt_cache_retention")
    if key is not None:
        expect(key, str, "prompt_cache_key")
    if retention is not None and retention not in RETENTIONS:
        raise FieldError("prompt_cache_retention", f"expected in_memory or 24h, got {retention!r:.40}")
    return {"cache_key": key, "cache_retention": RETENTIONS.get(retention) if retention else None}


def _tool(tool: Any, j: int) -> dict[str, Any]:
    fn = expect(expect(tool, dict, f"tools[{j}]").get("function"), dict, f"tools[{j}].function")
    extra = {k: v for k, v in fn.items() if k not in ("name", "description", "parameters")}
    return function_tool(
        fn.get("name"), fn.get("description"), fn.get("parameters"), extra, f"tools[{j}].function"
    )
