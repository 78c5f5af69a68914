"""Which format a trace is in. Whole files written by agent harnesses, proxies and tracers are told apart
by their first record (`detect_file`): Claude Code transcripts, Codex rollouts, claude-trace logs, HAR
files, OpenTelemetry (OTLP JSON) exports, hash-id (Mooncake) traces and the trajectories of mini-swe-agent
(`trajectory_format`) and SWE-agent (`trajectory` steps with a `query`). Otherwise each entry is a request
body in OpenAI Chat Completions, OpenAI Responses or Anthropic Messages form (`detect`).

Bodies are told apart by what only one of them has: Responses bodies have `input`/`instructions`; Anthropic bodies a
top-level `system`, `cache_control`, tools with `input_schema` or `tool_use`/`tool_result`/`thinking`
blocks; Chat Completions bodies `system`/`developer`/`tool` roles or `tool_calls`. A body of plain user
and assistant strings reads the same either way (None: undecided).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from engine.traces.anthropic_messages import parse_anthropic
from engine.traces.fields import FieldError, loads
from engine.traces.openai_chat import parse_chat_completions
from engine.traces.request import TraceRequest
from engine.traces.responses import parse_responses

PARSERS: dict[str, Callable[[Any], TraceRequest]] = {
    "openai-chat": parse_chat_completions,
    "openai-responses": parse_responses,
    "anthropic": parse_anthropic,
}
ANTHROPIC_BLOCKS = {"tool_use", "tool_result", "thinking", "redacted_thinking"}
FILE_FORMATS = (
    "claude-code",
    "codex",
    "claude-trace",
    "har",
    "otel",
    "mooncake",
    "mini-swe-agent",
    "swe-agent",
)
FORMATS = (*PARSERS, *FILE_FORMATS)
CODEX_TYPES = {"session_meta", "turn_context", "response_item", "event_msg", "compacted"}
CLAUDE_CODE_TYPES = {"summary", "file-history-snapshot", "queue-operation"}


def _anthropic_marks(body: dict[str, Any]) -> bool:
    if "system" in body or "cache_control" in body:
        return True
    if any(isinstance(t, dict) and "input_schema" in t for t in body.get("tools") or []):
        return True
    blocks = [
        b
        for m in body["messages"]
        if isinstance(m, dict) and isinstance(m.get("content"), list)
        for b in m["content"]
        if isinstance(b, dict)
    ]
    return any(b.get("type") in ANTHROPIC_BLOCKS or "cache_control" in b for b in blocks)


def _chat_marks(body: dict[str, Any]) -> bool:
    msgs = [m for m in body["messages"] if isinstance(m, dict)]
    return any(m.get("role") in ("system", "developer", "tool") or "tool_calls" in m for m in msgs)


def detect(body: Any) -> str | None:
    """The format of one request body; None when it reads the same as Chat Completions and Anthropic."""
    if isinstance(body, list):
        return "openai-chat"  # a bare message list: today's trace format
    if not isinstance(body, dict):
        return None
    if "input" in body or "instructions" in body:
        return "openai-responses"
    if not isinstance(body.get("messages"), list):
        return None
    if _anthropic_marks(body):
        return "anthropic"
    return "openai-chat" if _chat_marks(body) else None


def _record_format(first: dict[str, Any]) -> str | None:
    if str(first.get("trajectory_format", "")).startswith("mini-swe-agent"):
        return "mini-swe-agent"
    steps = first.get("trajectory")
    if isinstance(steps, list) and any(isinstance(s, dict) and "query" in s for s in steps[:1]):
        return "swe-agent"
    if "resourceSpans" in first:
        return "otel"
    if "hash_ids" in first or (isinstance(first.get("requests"), list) and "block_size" in first):
        return "mooncake"
    if isinstance(first.get("log"), dict) and "entries" in first["log"]:
        return "har"
    if isinstance(first.get("request"), dict) and "url" in first["request"] and "response" in first:
        return "claude-trace"
    if first.get("type") in CODEX_TYPES and "payload" in first:
        return "codex"
    if "parentUuid" in first or "sessionId" in first or first.get("type") in CLAUDE_CODE_TYPES:
        return "claude-code"
    return None


def detect_file(text: str) -> str | None:
    """The file-level format of a trace file's text, from its first record (None: request bodies)."""
    line = next((x for x in text.splitlines() if x.strip()), "")
    # not JSON, or beyond the bounds: undecided, and the reader of request bodies says which, naming the line
    try:
        first = loads(line, strings=False)
    except json.JSONDecodeError:  # a JSON document over several lines
        try:
            first = loads(text, strings=False)
        except (ValueError, FieldError):
            return None
    except (ValueError, FieldError):
        return None
    return _record_format(first) if isinstance(first, dict) else None
