"""The prompt parts a harness does not record, supplied by the user: `--system-file` (the system prompt as
text) and `--tools-file` (a JSON list of tool definitions in Anthropic form, `{name, description,
input_schema}`, or OpenAI's, `{type: "function", function: {...}}` or the Responses API's flat one).
Claude Code transcripts hold neither, Codex rollouts no tool specs; without them a request is analysed on
what the trace holds, and every figure is marked "messages only"."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import TraceError
from engine.traces.fields import FieldError, JSONLimitError, expect, loads
from engine.traces.records import read_text


@dataclass(frozen=True)
class Supplied:
    system: str | None = None
    tools: tuple[dict[str, Any], ...] | None = None  # as (name, description, JSON schema) dicts

    def missing(self, holds_system: bool) -> tuple[str, ...]:
        """The parts still missing from a request of a format that holds the system prompt or not."""
        return tuple(
            part
            for part, there in (
                ("system", holds_system or self.system is not None),
                ("tools", self.tools is not None),
            )
            if not there
        )

    def anthropic_tools(self) -> list[dict[str, Any]]:
        return [
            {"name": t["name"], "description": t.get("description", ""), "input_schema": t["schema"]}
            for t in self.tools or ()
        ]

    def responses_tools(self) -> list[dict[str, Any]]:
        return [
            {
                "type": "function",
                "name": t["name"],
                "description": t.get("description", ""),
                "parameters": t["schema"],
            }
            for t in self.tools or ()
        ]


def _tool(raw: Any, j: int) -> dict[str, Any]:
    at = f"[{j}]"
    t = expect(raw, dict, at)
    fn = t.get("function", t) if isinstance(t.get("function"), dict) else t
    schema = next((fn[k] for k in ("input_schema", "parameters") if k in fn), None)
    if schema is None:
        raise FieldError(f"{at}.input_schema", "missing: each tool needs input_schema (or parameters)")
    return {
        "name": expect(fn.get("name"), str, f"{at}.name"),
        "description": fn.get("description") or "",
        "schema": expect(schema, dict, f"{at}.input_schema"),
    }


def load_supplied(system_file: Path | None, tools_file: Path | None) -> Supplied:
    system = read_text(system_file, "--system-file") if system_file is not None else None
    if tools_file is None:
        return Supplied(system)
    try:
        raw = loads(read_text(tools_file, "--tools-file"))
        return Supplied(system, tuple(_tool(t, j) for j, t in enumerate(expect(raw, list, "tools"))))
    except json.JSONDecodeError as e:
        raise TraceError(f"--tools-file {tools_file} is not valid JSON: {e}") from None
    except (FieldError, JSONLimitError) as e:
        raise TraceError(f"--tools-file {tools_file}: {e}") from None
