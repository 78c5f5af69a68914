"""A Codex rollout as the reader tests write it: two calls, a repeated token_count, an 8-minute pause and a
compaction."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.traces.agent_common import SOURCE, at, write_jsonl


def codex_rollout(path: Path) -> Path:
    """A Codex session: two calls, a repeated token_count, an 8-minute pause, a compaction."""

    def line(t: float, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        return {"timestamp": at(t), "type": kind, "payload": payload}

    def message(t: float, role: str, text: str) -> dict[str, Any]:
        part = "output_text" if role == "assistant" else "input_text"
        return line(
            t, "response_item", {"type": "message", "role": role, "content": [{"type": part, "text": text}]}
        )

    def usage(t: float, prompt: int, cached: int) -> dict[str, Any]:
        last = {
            "input_tokens": prompt,
            "cached_input_tokens": cached,
            "output_tokens": 50,
            "reasoning_output_tokens": 10,
            "total_tokens": prompt + 50,
        }
        return line(
            t,
            "event_msg",
            {
                "type": "token_count",
                "info": {"total_token_usage": last, "last_token_usage": last},
                "rate_limits": {},
            },
        )

    rows = [
        line(
            0,
            "session_meta",
            {
                "id": "codex-1",
                "cwd": "/repo",
                "cli_version": "0.58.0",
                "base_instructions": {"text": "You are Codex, a coding agent. " * 40},
            },
        ),
        line(0, "turn_context", {"cwd": "/repo", "model": "gpt-5-codex", "approval_policy": "on-request"}),
        message(0, "user", "<environment_context><cwd>/repo</cwd></environment_context>"),
        message(1, "user", "Fix the failing date test."),
        line(1, "event_msg", {"type": "user_message", "message": "Fix the failing date test."}),
        line(1, "event_msg", {"type": "token_count", "info": None, "rate_limits": {}}),
        line(2, "response_item", {"type": "reasoning", "summary": [], "encrypted_content": "gAAA"}),
        line(
            2,
            "response_item",
            {
                "type": "function_call",
                "name": "shell",
                "arguments": json.dumps({"command": ["cat", "iso.py"]}),
                "call_id": "c1",
            },
        ),
        usage(3, 1400, 0),
        usage(3, 1400, 0),  # repeated: no new items since
        line(4, "response_item", {"type": "function_call_output", "call_id": "c1", "output": SOURCE}),
        line(
            5,
            "response_item",
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "The format lacks %z."}],
            },
        ),
        usage(6, 3300, 1280),
        message(484, "user", "Then fix it."),
        line(
            485,
            "response_item",
            {"type": "custom_tool_call", "name": "apply_patch", "input": "*** Begin Patch", "call_id": "c2"},
        ),
        usage(486, 3400, 0),  # 8 minutes later: expired
        line(
            487,
            "compacted",
            {
                "message": "Summary: fixing iso.py.",
                "replacement_history": [
                    {
                        "type": "message",
                        "role": "user",
                        "content": [{"type": "input_text", "text": "Summary: fixing iso.py."}],
                    }
                ],
            },
        ),
        message(488, "user", "Run the tests."),
        line(
            488,
            "response_item",
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "All pass."}],
            },
        ),
        usage(489, 1200, 1024),
    ]
    return write_jsonl(path, rows)
