"""Proxy captures as the reader tests write them: a claude-trace log (a streamed response, a side request,
other endpoints) and a HAR file (a cache key, a stream, base64 content, a failure, a page load)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from tests.traces.agent_common import (
    MODEL,
    READ,
    SOURCE,
    START,
    anthropic_usage,
    at,
    tool_result,
    tool_use,
    write_jsonl,
)


def _messages_body(system: str, messages: list[dict[str, Any]], model: str = MODEL) -> dict[str, Any]:
    return {
        "model": model,
        "max_tokens": 1024,
        "system": [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
        "tools": [READ],
        "messages": messages,
    }


def _marked(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages with Claude Code's moving breakpoint on the last block."""
    out = json.loads(json.dumps(messages))
    last = out[-1]["content"]
    if isinstance(last, str):
        out[-1]["content"] = last = [{"type": "text", "text": last}]
    last[-1]["cache_control"] = {"type": "ephemeral"}
    return out


def claude_trace_log(path: Path) -> Path:
    """claude-trace pairs: three /v1/messages turns (one streamed), a haiku side request, and requests to
    other endpoints (skipped)."""
    system = "You are Claude Code, Anthropic's CLI for Claude. " * 100
    turns = [
        [{"role": "user", "content": "Fix the failing date test."}],
    ]
    turns.append(
        turns[0]
        + [
            {"role": "assistant", "content": [tool_use("t1", "iso.py")]},
            {"role": "user", "content": tool_result("t1", SOURCE)},
        ]
    )
    turns.append(
        turns[1]
        + [
            {"role": "assistant", "content": [{"type": "text", "text": "Fixed."}]},
            {"role": "user", "content": "Thanks"},
        ]
    )
    usages = [
        anthropic_usage(0, 1497),
        anthropic_usage(1497, 1500),
        anthropic_usage(0, 3000),  # 6 minutes on: expired
    ]  # the third after 6 min
    times = [1, 20, 400]
    rows = []
    for k, (msgs, usage, t) in enumerate(zip(turns, usages, times, strict=True)):
        body = _messages_body(system, _marked(msgs))
        answer: dict[str, Any] = {
            "timestamp": (START.timestamp() + t + 2),
            "status_code": 200,
            "headers": {"x": "1"},
        }
        if k == 1:
            events = [
                {"type": "message_start", "message": {"id": f"m{k}", "usage": usage | {"output_tokens": 1}}},
                {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "Fixed."}},
                {"type": "message_delta", "usage": {"output_tokens": 44}},
            ]
            answer["body_raw"] = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
        else:
            answer["body"] = {"id": f"m{k}", "type": "message", "usage": usage}
        request = {
            "timestamp": (START.timestamp() + t) * 1000,
            "method": "POST",
            "url": "https://api.anthropic.com/v1/messages?beta=true",
            "headers": {"x-api-key": "sk-ant-secret"},
            "body": body,
        }
        rows.append({"request": request, "response": answer, "logged_at": at(t)})
    side = {"model": "claude-haiku-4-5", "max_tokens": 1, "messages": [{"role": "user", "content": "quota"}]}
    rows.insert(
        1,
        {
            "request": {
                "timestamp": START.timestamp() + 2,
                "method": "POST",
                "url": "https://api.anthropic.com/v1/messages",
                "headers": {},
                "body": side,
            },
            "response": {"status_code": 200, "body": {"usage": {"input_tokens": 8, "output_tokens": 1}}},
        },
    )
    rows.append(
        {
            "request": {
                "timestamp": START.timestamp() + 3,
                "method": "POST",
                "url": "https://api.anthropic.com/api/event_logging/batch",
                "headers": {},
                "body": {},
            },
            "response": {"status_code": 200, "body": {}},
        }
    )
    rows.append(
        {
            "request": {
                "timestamp": START.timestamp() + 4,
                "method": "POST",
                "url": "https://api.anthropic.com/v1/messages/count_tokens",
                "headers": {},
                "body": side,
            },
            "response": {"status_code": 200, "body": {"input_tokens": 8}},
        }
    )
    return write_jsonl(path, rows)


def har_file(path: Path) -> Path:
    """A HAR of OpenAI Chat Completions calls with a prompt_cache_key (one streamed, one base64-encoded),
    a failed request and a page load."""
    system = "You are a billing assistant for ACME. " * 150
    msgs = [{"role": "system", "content": system}, {"role": "user", "content": "What do I owe?"}]
    entries = []
    for k, (t, cached) in enumerate([(0, 0), (30, 1408), (45, None)]):
        body = {"model": "gpt-4.1", "messages": msgs, "prompt_cache_key": "acct-7", "stream": k == 1}
        usage = {"prompt_tokens": 1450 + 40 * k, "completion_tokens": 12}
        if cached is not None:
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
        if k == 1:
            chunks = [{"choices": [{"delta": {"content": "You owe"}}]}, {"choices": [], "usage": usage}]
            content = {
                "mimeType": "text/event-stream",
                "text": "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n",
            }
        else:
            text = json.dumps({"id": f"c{k}", "choices": [], "usage": usage})
            content = (
                {
                    "mimeType": "application/json",
                    "text": base64.b64encode(text.encode()).decode(),
                    "encoding": "base64",
                }
                if k == 2
                else {"mimeType": "application/json", "text": text}
            )
        entries.append(
            {
                "startedDateTime": at(t),
                "request": {
                    "method": "POST",
                    "url": "https://api.openai.com/v1/chat/completions",
                    "headers": [{"name": "Authorization", "value": "Bearer sk-secret"}],
                    "postData": {"mimeType": "application/json", "text": json.dumps(body)},
                },
                "response": {"status": 200, "content": content},
            }
        )
        msgs = msgs + [
            {"role": "assistant", "content": "You owe $120."},
            {"role": "user", "content": f"And after payment {k}?"},
        ]
    entries.append(
        {
            "startedDateTime": at(50),
            "request": {
                "method": "POST",
                "url": "https://api.openai.com/v1/chat/completions",
                "postData": {"text": json.dumps({"model": "gpt-4.1", "messages": msgs})},
            },
            "response": {"status": 429, "content": {"text": "{}"}},
        }
    )
    entries.append(
        {
            "startedDateTime": at(51),
            "request": {"method": "GET", "url": "https://platform.openai.com/usage"},
            "response": {"status": 200, "content": {"text": "<html>"}},
        }
    )
    path.write_text(
        json.dumps({"log": {"version": "1.2", "creator": {"name": "mitmproxy"}, "entries": entries}})
    )
    return path
