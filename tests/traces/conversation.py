"""One small tool-calling exchange written in each input format (for the parser tests)."""

from __future__ import annotations

from typing import Any

SYSTEM = "You are a billing assistant."
ARGS = '{"invoice": "INV-7"}'
SCHEMA = {"type": "object", "properties": {"invoice": {"type": "string"}}}


def chat() -> dict[str, Any]:
    return {
        "model": "gpt-4.1",
        "messages": [
            {"role": "developer", "content": SYSTEM},
            {
                "role": "user",
                "content": [{"type": "text", "text": "What do I owe?"}, {"type": "text", "text": "Quickly."}],
            },
            {
                "role": "assistant",
                "content": "Looking.",
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": ARGS}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "name": "lookup", "content": '{"due": 120}'},
        ],
        "tools": [
            {"type": "function", "function": {"name": "lookup", "description": "Find", "parameters": SCHEMA}}
        ],
    }


def responses() -> dict[str, Any]:
    return {
        "model": "gpt-4.1",
        "instructions": SYSTEM,
        "input": [
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "What do I owe?"},
                    {"type": "input_text", "text": "Quickly."},
                ],
            },
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Looking."}],
            },
            {"type": "reasoning", "summary": []},
            {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": ARGS},
            {"type": "function_call_output", "call_id": "c1", "output": '{"due": 120}'},
        ],
        "tools": [{"type": "function", "name": "lookup", "description": "Find", "parameters": SCHEMA}],
    }


def anthropic() -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-5",
        "system": [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "What do I owe?"}, {"type": "text", "text": "Quickly."}],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "hm", "signature": "x"},
                    {"type": "text", "text": "Looking."},
                    {"type": "tool_use", "id": "c1", "name": "lookup", "input": {"invoice": "INV-7"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "c1",
                        "content": '{"due": 120}',
                        "cache_control": {"type": "ephemeral", "ttl": "1h"},
                    }
                ],
            },
        ],
        "tools": [{"name": "lookup", "description": "Find", "input_schema": SCHEMA}],
    }
