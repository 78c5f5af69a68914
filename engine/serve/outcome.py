"""A finished request as both APIs answer it: the content, the tool calls parsed from it, why it ended
(`end`: end of turn; `stop_sequence`; `length`: max_tokens; `tool_calls`) and which stop sequence."""

from __future__ import annotations

from dataclasses import dataclass

from engine.serve.chat_request import ChatRequest
from engine.serve.tool_calls import Parsed, parse_tool_calls
from engine.serve.worker import Finished


@dataclass(frozen=True)
class Outcome:
    parsed: Parsed
    reason: str  # end | stop_sequence | length | tool_calls
    stop_sequence: str | None


def outcome_of(req: ChatRequest, fin: Finished) -> Outcome:
    text = fin.generation.text  # stop sequences already cut by the engine
    parsed = parse_tool_calls(text) if req.parse_tools else Parsed(text, [])
    hits = [(fin.full_text.index(s), s) for s in req.stop if s in fin.full_text]
    stop = min(hits)[1] if hits and fin.generation.finish_reason == "stop" else None
    if parsed.calls:
        reason = "tool_calls"
    elif fin.generation.finish_reason == "length":
        reason = "length"
    else:
        reason = "stop_sequence" if stop is not None else "end"
    return Outcome(parsed, reason, stop)
