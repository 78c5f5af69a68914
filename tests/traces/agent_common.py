"""Shared pieces of the trace files the reader tests write: times, a long source file the agent reads (its
tool result takes a prompt past 1,024 tokens), Anthropic usage as the moving breakpoint reports it."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

START = dt.datetime(2026, 11, 30, 9, 0, 0, tzinfo=dt.timezone.utc)
MODEL = "claude-sonnet-4-5-20250929"
SOURCE = "\n".join(
    f"def parse_{i}(text: str, fmt: str = '%Y-%m-%d') -> datetime:  # line {i}\n    return datetime.strptime(text, fmt)"
    for i in range(90)
)  # a long file the agent reads: its tool result takes the prompt past 1,024 tokens
READ = {
    "name": "read_file",
    "description": "Read a file.",
    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
}


def at(seconds: float) -> str:
    return (START + dt.timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def anthropic_usage(
    read: int, write: int, fresh: int = 3, out: int = 40, hour: bool = False
) -> dict[str, Any]:
    split = {
        "ephemeral_5m_input_tokens": 0 if hour else write,
        "ephemeral_1h_input_tokens": write if hour else 0,
    }
    return {
        "input_tokens": fresh,
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": write,
        "cache_creation": split,
        "output_tokens": out,
    }


def tool_use(call: str, path: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": call, "name": "read_file", "input": {"path": path}}


def tool_result(call: str, content: str) -> list[dict[str, Any]]:
    return [{"type": "tool_result", "tool_use_id": call, "content": content}]
