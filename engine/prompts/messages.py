"""Chat messages and tool definitions as users hand them in: one request's JSON read into (messages, tools),
the messages validated, and tool calls built with OpenAI's JSON-string arguments parsed into the objects
templates expect."""

from __future__ import annotations

import json
from typing import Any

from engine.arguments import string
from engine.errors import PromptError

Message = dict[str, Any]
ROLES = ("system", "user", "assistant", "tool")


def validate_messages(messages: object) -> list[Message]:
    """The messages, checked, with OpenAI multi-part text content (`[{"type": "text", "text": ...}]`)
    joined into one string by newlines, as vLLM does for templates that take strings. Other part types
    (images, audio, files) are refused by name."""
    if not isinstance(messages, list | tuple):
        raise PromptError(f"messages must be a list of chat messages, got {type(messages).__name__}")
    if not messages:
        raise PromptError("empty prompt: the message list has no messages")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            raise PromptError(
                f"message {i} must be a dict whose role is one of {', '.join(ROLES)}; got {m!r:.80}"
            )
        content = _content_text(i, m.get("content"))
        if content is None and not m.get("tool_calls"):
            raise PromptError(f"message {i} ({m['role']}) has no text content and no tool calls")
        out.append(m if content is m.get("content") else {**m, "content": content})
    return out


def _content_text(i: int, content: object) -> str | None:
    """A message's content as one string (None: it has none)."""
    if content is None or isinstance(content, str):
        return None if content is None else string(f"message {i} content", content, PromptError)
    if not isinstance(content, list):
        raise PromptError(
            f"message {i} content must be text or a list of text parts, got {type(content).__name__}"
        )
    texts = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else type(part).__name__
        if kind != "text" or not isinstance(part.get("text"), str):
            raise PromptError(
                f"message {i} content part {j} is {kind!r}: only text parts "
                "({'type': 'text', 'text': ...}) are implemented"
            )
        texts.append(string(f"message {i} content part {j}", part["text"], PromptError))
    return "\n".join(texts)


def validate_tools(tools: object) -> list[dict[str, Any]] | None:
    """Tool definitions: None or a list of dicts (a string is refused, never read one tool per character)."""
    if tools is None:
        return None
    if not isinstance(tools, list | tuple) or not all(isinstance(t, dict) for t in tools):
        what = type(tools).__name__ if not isinstance(tools, list | tuple) else "a list holding a non-dict"
        raise PromptError(f"tools must be a list of tool definitions (dicts), got {what}")
    return list(tools)


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
