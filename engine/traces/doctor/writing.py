"""Requests written as OpenAI Chat Completions bodies in log envelopes (time, session), one per line: the
form every trace reader normalizes to, which `replay` and `doctor` read back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.prompts.messages import Message
from engine.traces.request import TraceRequest


def wire_message(m: Message) -> dict[str, Any]:
    """A message as the API sends it: tool-call arguments as JSON strings, each call with an id."""
    if not m.get("tool_calls"):
        return dict(m)
    calls = []
    for i, c in enumerate(m["tool_calls"]):
        args = c["function"].get("arguments", {})
        fn = {**c["function"], "arguments": args if isinstance(args, str) else json.dumps(args)}
        calls.append({**c, "id": c.get("id", f"call_{i}"), "type": "function", "function": fn})
    return {**m, "tool_calls": calls}


def chat_body(messages: list[Message], tools: list | None, model: str | None) -> dict[str, Any]:
    body: dict[str, Any] = {"messages": [wire_message(m) for m in messages]}
    if tools:
        body["tools"] = tools
    if model:
        body["model"] = model
    return body


def envelope_line(body: dict[str, Any], time_s: float | None, session: str) -> str:
    return json.dumps({"timestamp": time_s, "session": session, "body": body}, ensure_ascii=False)


def write_chat_trace(path: Path, requests: list[TraceRequest]) -> None:
    lines = [envelope_line(chat_body(r.messages, r.tools, r.model), r.timestamp, r.session) for r in requests]
    path.write_text("\n".join(lines) + "\n")
