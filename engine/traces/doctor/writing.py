"""A rewritten trace written in the format it was read from, so that what read it reads it back.

- Request bodies (OpenAI Chat Completions, OpenAI Responses, Anthropic Messages, and the server's own
  `--record` files, which hold such bodies) are written as the record writes them: one log envelope per
  line (time, session, `format`, `body`), each body in its own API's form (`engine.traces.bodies`). What
  described the original requests is not written: the usage a provider or the server reported. A
  `tools_first` rewrite is not written into an Anthropic body (the API puts the tools first already; the
  empty system text that makes a local template do so is no valid Anthropic block).
- A mini-swe-agent trajectory is written as the trajectory it was read from with the rewritten
  conversation (each call's request is the messages before its assistant message), each assistant
  message keeping its raw response less its usage; rewritten requests that are no one growing
  conversation are refused.
- The formats agents and tracers write as records of their own (Claude Code transcripts, Codex rollouts,
  claude-trace logs, HAR, OpenTelemetry, SWE-agent trajectories) are refused by name (`unwritable`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from engine.errors import InvalidArgumentError
from engine.traces.bodies import anthropic_body, cache_fields, openai_body, responses_body
from engine.traces.doctor.moves import leading_system
from engine.traces.records import json_document
from engine.traces.request import Breakpoint, TraceRequest
from engine.traces.shipped import trace_path

TRAJECTORY = "mini-swe-agent"
NOT_WRITTEN = {
    "claude-code": "Claude Code transcripts (a tree of records without the system prompt or tools)",
    "codex": "Codex rollouts (an event log of Codex's own)",
    "claude-trace": "claude-trace logs (captured HTTP exchanges)",
    "har": "HAR files (captured HTTP exchanges)",
    "otel": "OpenTelemetry exports (spans)",
    "swe-agent": "SWE-agent trajectories (steps of the agent's own)",
}


def _anthropic(req: TraceRequest) -> dict[str, Any]:
    """The Messages body, without `tools_first`'s empty first system message (its breakpoints index the
    blocks kept from before it, or, re-derived since, the blocks after it: then they move back one)."""
    if len(leading_system(req.messages)) > 1 and req.messages[0]["content"] == "":
        n = len(req.tools or [])
        marks = {(b.block - (b.block > n and not req.blocks), b.ttl_s) for b in req.breakpoints}
        req = replace(
            req, messages=req.messages[1:], breakpoints=tuple(Breakpoint(*m) for m in sorted(marks))
        )
    return anthropic_body(req, system_turns=True)


BODIES: dict[str, Callable[[TraceRequest], dict[str, Any]]] = {
    "openai-chat": lambda r: openai_body(r) | cache_fields(r),
    "openai-responses": responses_body,
    "anthropic": _anthropic,
}


def chat_body(messages: list[dict[str, Any]], tools: list | None, model: str | None) -> dict[str, Any]:
    """A Chat Completions body of `messages` and `tools` for `model`."""
    return openai_body(TraceRequest(messages, tools)) | ({"model": model} if model else {})


def envelope_line(body: dict[str, Any], time_s: float | None, session: str, fmt: str = "openai-chat") -> str:
    entry = {"timestamp": time_s, "session_id": session, "format": fmt, "body": body}
    return json.dumps(entry, ensure_ascii=False)


def unwritable(requests: Sequence[TraceRequest], traces: Sequence[str]) -> str | None:
    """Why the requests cannot be written in the format they were read from (None: they can)."""
    formats = list(dict.fromkeys(r.source_format for r in requests))
    refused = [f for f in formats if f in NOT_WRITTEN]
    if refused:
        writes = "--apply writes request bodies and mini-swe-agent trajectories"
        return f"{NOT_WRITTEN[refused[0]]} are not written: {writes}"
    if TRAJECTORY in formats and (
        formats != [TRAJECTORY] or len(traces) != 1 or not trace_path(traces[0]).is_file()
    ):
        return "a mini-swe-agent trajectory is written from one trajectory file given alone"
    return None


def write_trace(path: Path, requests: Sequence[TraceRequest], traces: Sequence[str]) -> None:
    """`requests` (rewritten) in the format they were read from; `traces`: the files given (a trajectory
    is written over its own file's other fields)."""
    why = unwritable(requests, traces)
    if why is not None:
        raise InvalidArgumentError(f"--apply: {why}")
    if requests and requests[0].source_format == TRAJECTORY:
        path.write_text(json.dumps(trajectory(trace_path(traces[0]), requests), ensure_ascii=False, indent=1))
        return
    lines = []
    for r in requests:
        fmt = r.source_format or "openai-chat"
        body = BODIES[fmt](r) | ({"model": r.model} if r.model else {})
        lines.append(envelope_line(body, r.timestamp, r.session, fmt))
    path.write_text("\n".join(lines) + "\n")


def trajectory(source: Path, requests: Sequence[TraceRequest]) -> dict[str, Any]:
    """The mini-swe-agent trajectory `source` with the rewritten conversation: the last request's messages,
    then the original's messages from the last call's assistant message on."""
    doc = json_document(source)
    raw = doc["messages"]
    answers = [i for i, m in enumerate(raw) if m.get("role") == "assistant" and i > 0]
    conversation = openai_body(requests[-1])["messages"]
    calls = [i for i, m in enumerate(conversation) if m["role"] == "assistant" and i > 0]
    grows = calls == [len(r.messages) for r in requests[:-1]] and all(
        conversation[: len(r.messages)] == openai_body(r)["messages"] for r in requests
    )
    if not grows or len(answers) != len(requests):
        raise InvalidArgumentError(
            "--apply: the rewritten requests are not one growing conversation, which a mini-swe-agent "
            "trajectory holds (each call's request is the messages before its reply)"
        )
    for i, k in zip(calls, answers, strict=False):
        conversation[i]["extra"] = _without_usage(raw[k].get("extra"))
    return {**doc, "messages": [*conversation, *(_without_usage_message(m) for m in raw[answers[-1] :])]}


def _without_usage(extra: Any) -> Any:
    """A message's `extra` less its raw response's usage (which described the original request)."""
    if not isinstance(extra, dict) or not isinstance(extra.get("response"), dict):
        return extra
    response = {k: v for k, v in extra["response"].items() if k != "usage"}
    return {**extra, "response": response}


def _without_usage_message(m: dict[str, Any]) -> dict[str, Any]:
    return {**m, "extra": _without_usage(m["extra"])} if "extra" in m else m
