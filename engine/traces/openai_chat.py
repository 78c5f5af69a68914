"""Today's trace format: a JSON list with one entry per request, each a list of chat messages (OpenAI
format, tool calls included) or {"messages": [...], "tools": [...]}."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import PromptError, TraceError
from engine.traces.messages import Message, parse_tool_arguments, split_request, validate_messages


@dataclass(frozen=True)
class TraceRequest:
    messages: list[Message]
    tools: list[dict[str, Any]] | None = None


def read_trace(path: Path) -> list[TraceRequest]:
    """Every request of the trace, validated (refused with the request's number, never skipped)."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise TraceError(f"trace file {path} does not exist") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise TraceError(f"trace file {path} is not valid JSON: {e}") from None
    if not isinstance(data, list) or not data:
        raise TraceError(f"{path}: expected a non-empty JSON list of requests")
    requests = []
    for i, entry in enumerate(data):
        messages, tools = split_request(entry)
        if not isinstance(messages, list):
            raise TraceError(
                f"{path}: request {i + 1} is neither a message list nor an object with 'messages'"
            )
        try:
            validate_messages(messages)
        except PromptError as e:
            raise TraceError(f"{path}: request {i + 1}: {e}") from None
        requests.append(TraceRequest([parse_tool_arguments(m) for m in messages], tools))
    return requests
