"""Trajectories that SWE-bench agents write -> `TraceRequest`s, one per model call.

- mini-swe-agent (`<instance>.traj.json`, `trajectory_format` `mini-swe-agent-*`): `messages` is the whole
  conversation in Chat Completions form (system, user, then assistant messages with their tool calls and
  tool or user observations), ending with an `exit` message (the submission: no model call, skipped). Each
  assistant message is one call: its request is every message before it, its usage the raw response's
  (`extra.response.usage`, with the provider inferred: DeepSeek's `prompt_cache_hit_tokens`, ...), its
  time the response's `created` (else the message's `extra.timestamp`), its model the response's.
- SWE-agent >= 1.0 (`<instance>.traj`): `trajectory` holds one step per call, and each step's `query` is the
  exact input the model got (history processors rewrite old observations, so a step's input is not always
  the one before plus its reply: the misses that causes are real); tool results name their call in
  `tool_call_ids`. SWE-agent records no per-call usage or time: the requests are 1 s apart.

Each file is one session (its `instance_id`, else its path). Neither holds the tool definitions
(`--tools-file`): without them a request is marked missing `tools`.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from engine.errors import TraceError
from engine.traces.fields import FieldError, expect
from engine.traces.openai_chat import parse_chat_completions
from engine.traces.records import Read, json_document, seconds
from engine.traces.request import TraceRequest
from engine.traces.supplied import Supplied
from engine.traces.usage import RecordedUsage, openai_usage, provider_of

NO_CALL = ("exit",)  # mini-swe-agent's last message: the submission, no model call


def _conversation(messages: list[Any], supplied: Supplied, where: str) -> TraceRequest:
    """The messages parsed once, as one Chat Completions body (with the supplied tools)."""
    body: dict[str, Any] = {"messages": messages}
    if supplied.tools is not None:
        body["tools"] = [
            {
                "type": "function",
                "function": {"name": t["name"], "description": t["description"], "parameters": t["schema"]},
            }
            for t in supplied.tools
        ]
    try:
        return parse_chat_completions(body)
    except FieldError as e:
        raise TraceError(f"{where}: {e}") from None


def _usage(message: dict[str, Any], model: str | None, where: str) -> RecordedUsage | None:
    response = (message.get("extra") or {}).get("response")
    usage = response.get("usage") if isinstance(response, dict) else None
    if usage is None:
        return None
    return openai_usage(usage, model, where, provider_of(usage, model, "openai-chat"))


def _dig(value: Any, *keys: str) -> Any:
    """value[k1][k2]... where each level is an object holding the key, else None."""
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def read_mini_swe_agent(path: Path, supplied: Supplied | None = None) -> Read:
    supplied = supplied or Supplied()
    try:
        doc = expect(json_document(path), dict, "trajectory")
        raw = expect(doc.get("messages"), list, "messages")
        kept = [
            (i, m) for i, m in enumerate(raw) if expect(m, dict, f"messages[{i}]").get("role") not in NO_CALL
        ]
    except FieldError as e:
        raise TraceError(f"{path}: {e}") from None
    whole = _conversation([m for _, m in kept], supplied, str(path))
    session = str(doc.get("instance_id") or path)
    default_model = _dig(doc, "info", "config", "model", "model_name")
    out, unrecorded = [], 0
    for k, (i, m) in enumerate(kept):
        if m["role"] != "assistant" or k == 0:
            continue
        extra = m.get("extra") if isinstance(m.get("extra"), dict) else {}
        response = extra.get("response") if isinstance(extra.get("response"), dict) else {}
        model = response.get("model") or default_model
        where = f"messages[{i}].extra.response"
        try:
            usage = _usage(m, model, f"{where}.usage")
            when = response.get("created", extra.get("timestamp"))
            time = seconds(when, f"{where}.created") if when is not None else None
        except FieldError as e:
            raise TraceError(f"{path}: {e}") from None
        unrecorded += usage is None
        out.append(
            replace(
                whole,
                messages=whole.messages[:k],
                model=model if isinstance(model, str) else None,
                timestamp=time,
                session=session,
                recorded=usage,
                missing=supplied.missing(holds_system=True),
            )
        )
    notes = (
        ["skipped the final `exit` message (the submission, no model call)"] if len(kept) < len(raw) else []
    )
    if unrecorded:
        notes.append(f"{unrecorded} calls have no raw response with usage")
    return Read(out, notes)


def _query_message(m: Any, where: str) -> Any:
    """A SWE-agent history message as Chat Completions has it: `tool_call_ids` -> `tool_call_id`."""
    m = expect(m, dict, where)
    ids = m.get("tool_call_ids")
    if m.get("role") == "tool" and isinstance(ids, list) and ids and "tool_call_id" not in m:
        return m | {"tool_call_id": ids[0]}
    return m


def read_swe_agent(path: Path, supplied: Supplied | None = None) -> Read:
    supplied = supplied or Supplied()
    try:
        doc = expect(json_document(path), dict, "trajectory")
        steps = expect(doc.get("trajectory"), list, "trajectory")
    except FieldError as e:
        raise TraceError(f"{path}: {e}") from None
    session = str(doc.get("instance_id") or path)
    out, empty = [], 0
    for n, step in enumerate(steps):
        where = f"trajectory[{n}].query"
        try:
            query = expect(expect(step, dict, f"trajectory[{n}]").get("query") or [], list, where)
            messages = [_query_message(m, f"{where}[{j}]") for j, m in enumerate(query)]
        except FieldError as e:
            raise TraceError(f"{path}: {e}") from None
        if not messages:
            empty += 1
            continue
        req = _conversation(messages, supplied, f"{path}: {where}")
        out.append(replace(req, session=session, missing=supplied.missing(holds_system=True)))
    notes = [f"skipped {empty} steps without a query (no model call recorded)"] if empty else []
    return Read(out, notes)
