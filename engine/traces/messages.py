"""Chat messages and tool definitions as users hand them in: one request's JSON read into (messages, tools),
the messages validated, and OpenAI's JSON-string tool-call arguments parsed into the objects templates
expect."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from engine.errors import PromptError

Message = dict[str, Any]
ROLES = ("system", "user", "assistant", "tool")


def validate_messages(messages: Sequence[Message]) -> None:
    if not messages:
        raise PromptError("empty prompt: the message list has no messages")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            raise PromptError(
                f"message {i} must be a dict whose role is one of {', '.join(ROLES)}; got {m!r:.80}"
            )
        if not isinstance(m.get("content"), str) and not m.get("tool_calls"):
            raise PromptError(f"message {i} ({m['role']}) has no text content and no tool calls")


def split_request(data: Any) -> tuple[Any, Any]:
    """(messages, tools) of one request's JSON: a list of chat messages, or
    {"messages": [...], "tools": [...]}.
    Neither is checked here: the caller says what it expected in its own words."""
    return (data.get("messages"), data.get("tools")) if isinstance(data, dict) else (data, None)


def parse_tool_arguments(message: Message) -> Message:
    """OpenAI sends tool-call arguments as a JSON string; chat templates expect an object (as vLLM does)."""
    if not message.get("tool_calls"):
        return message
    calls = []
    for call in message["tool_calls"]:
        fn = dict(call.get("function", call))
        if isinstance(fn.get("arguments"), str):
            try:
                fn["arguments"] = json.loads(fn["arguments"])
            except json.JSONDecodeError:
                pass  # not JSON: the template renders the string as it is
        calls.append({**call, "function": fn} if "function" in call else fn)
    return {**message, "tool_calls": calls}
