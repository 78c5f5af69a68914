"""Chat messages and tool definitions as users hand them in: one request's JSON read into (messages, tools),
the messages validated, and tool calls built with OpenAI's JSON-string arguments parsed into the objects
templates expect."""

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


def parse_arguments(arguments: Any) -> Any:
    """OpenAI sends tool-call arguments as a JSON string; chat templates expect an object (as vLLM does).
    A string that is not JSON stays as it is: the template renders the string."""
    if not isinstance(arguments, str):
        return arguments
    try:
        return json.loads(arguments)
    except json.JSONDecodeError:
        return arguments


def tool_call(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    """One tool call in the form the engine renders, whichever format it came in."""
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": parse_arguments(arguments)},
    }
