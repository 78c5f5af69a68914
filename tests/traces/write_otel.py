"""OpenTelemetry GenAI exports as the reader tests write them (OTLP JSON): chat spans with content and usage
(one in the deprecated spellings), a tool span; or usage only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.traces.agent_common import START


def _attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value if isinstance(value, str) else json.dumps(value)}}


def otel_export(path: Path, content: bool = True) -> Path:
    """An OTLP JSON export of one agent run: three chat spans (usage with cache reads; the second uses the
    deprecated spellings) and a tool span; with `content`, the messages, system instructions and tools."""
    system = [{"type": "text", "content": "You are a support agent for ACME. " * 150}]
    tools = [
        {
            "type": "function",
            "name": "lookup",
            "description": "Find an invoice.",
            "parameters": {"type": "object", "properties": {}},
        }
    ]
    history = [{"role": "user", "parts": [{"type": "text", "content": "What do I owe?"}]}]
    spans = []
    for k, (t, prompt, read, old) in enumerate(
        [(0, 1500, 0, False), (20, 1600, 1408, True), (420, 1700, 0, False)]
    ):
        attrs = [
            _attr("gen_ai.operation.name", "chat"),
            _attr("gen_ai.provider.name", "openai"),
            _attr("gen_ai.request.model", "gpt-4.1"),
            _attr("gen_ai.conversation.id", "conv-9"),
        ]
        names = (
            ("gen_ai.usage.prompt_tokens", "gen_ai.usage.cache_read_input_tokens")
            if old
            else ("gen_ai.usage.input_tokens", "gen_ai.usage.cache_read.input_tokens")
        )
        attrs += [_attr(names[0], prompt), _attr(names[1], read), _attr("gen_ai.usage.output_tokens", 20)]
        if content:
            attrs += [
                _attr("gen_ai.system_instructions", system),
                _attr("gen_ai.input.messages", history),
                _attr("gen_ai.tool.definitions", tools),
            ]
        start = int((START.timestamp() + t) * 1e9)
        spans.append(
            {
                "traceId": "ab" * 16,
                "spanId": f"{k:016x}",
                "name": "chat gpt-4.1",
                "kind": 3,
                "startTimeUnixNano": str(start),
                "endTimeUnixNano": str(start + 10**9),
                "attributes": attrs,
            }
        )
        history = history + [
            {
                "role": "assistant",
                "parts": [{"type": "tool_call", "id": f"c{k}", "name": "lookup", "arguments": {"n": k}}],
            },
            {
                "role": "tool",
                "parts": [{"type": "tool_call_response", "id": f"c{k}", "response": {"due": 120 + k}}],
            },
        ]
    spans.append(
        {
            "traceId": "ab" * 16,
            "spanId": "f" * 16,
            "name": "execute_tool lookup",
            "startTimeUnixNano": str(int(START.timestamp() * 1e9)),
            "attributes": [_attr("gen_ai.operation.name", "execute_tool")],
        }
    )
    doc = {
        "resourceSpans": [
            {
                "resource": {"attributes": [_attr("service.name", "agent")]},
                "scopeSpans": [{"scope": {"name": "openai.agents"}, "spans": spans}],
            }
        ]
    }
    path.write_text(json.dumps(doc, indent=1))
    return path
