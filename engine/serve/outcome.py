"""A finished request as every API answers it: the content, the tool calls parsed from it, why it ended
(`end`: end of turn; `stop_sequence`; `length`: max_tokens; `tool_calls`), which stop sequence, and the
`kvtestbed` object the response carries (the engine thread's report, what the request's parsing noted, and
the tool calls' format and problems when calls were parsed)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.serve.chat_request import ChatRequest
from engine.serve.tool_calls import Parsed, parse_tool_calls
from engine.serve.worker import Finished


@dataclass(frozen=True)
class Outcome:
    parsed: Parsed
    reason: str  # end | stop_sequence | length | tool_calls
    stop_sequence: str | None
    report: dict[str, Any]  # the response's `kvtestbed` object


def outcome_of(req: ChatRequest, fin: Finished) -> Outcome:
    text = fin.generation.text  # stop sequences already cut by the engine
    fmt = req.calls_format
    parsed = parse_tool_calls(text, fmt) if fmt else Parsed(text, [])
    hits = [(fin.full_text.index(s), s) for s in req.stop if s in fin.full_text]
    stop = min(hits)[1] if hits and fin.generation.finish_reason == "stop" else None
    cut = fin.generation.finish_reason == "length"
    if parsed.calls and not (cut and any(p["problem"] == "unclosed" for p in parsed.problems)):
        reason = "tool_calls"
    elif cut:
        reason = "length"
    else:
        reason = "stop_sequence" if stop is not None else "end"
    report = fin.report | req.notes | ({"tool_calls": parsed.report(fmt)} if fmt else {})
    return Outcome(parsed, reason, stop, report)
