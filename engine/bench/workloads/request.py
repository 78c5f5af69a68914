"""`Request`: one turn's request as a workload writes it (messages, tools, and facts its record carries), what
`engine.bench.harness.replayer` replays."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.prompts.messages import Message


@dataclass(frozen=True)
class Request:
    messages: list[Message]
    tools: list[dict[str, Any]] | None = None
    meta: dict[str, Any] = field(default_factory=dict)  # facts the turn's record carries (e.g. compaction)
