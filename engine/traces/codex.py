"""Codex CLI rollouts (`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl`) -> `TraceRequest`s,
one per model call.

Lines are `{"timestamp", "type", "payload"}`: `session_meta` (first; `base_instructions`, older builds
`instructions`: the system prompt), `turn_context` (the model of the turns that follow), `response_item`
(the conversation as Responses API items: messages, reasoning, tool calls and their outputs), `event_msg`
(among them `token_count`, whose `info.last_token_usage` is the usage of the model call that just ended)
and `compacted` (the history replaced: by its `replacement_history` where recorded, else by the summary
message alone, the rest of what Codex keeps not being recorded). A `token_count` with usage closes a model
call: its response is the run of output items (assistant messages, reasoning, tool calls) just before it,
its input everything before those. A `token_count` with no new items (a repeat) or no usage is skipped.
Each file is one session, each call continuing the one before it (a compaction included). Not in a
rollout: the tool specs (`--tools-file`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

from engine.errors import TraceError
from engine.traces.fields import FieldError, expect
from engine.traces.records import Read, counted, json_lines, seconds
from engine.traces.request import TraceRequest
from engine.traces.responses import parse_responses
from engine.traces.supplied import Supplied
from engine.traces.usage import RecordedUsage, count

OUTPUT_ITEMS = ("reasoning", "function_call", "custom_tool_call", "local_shell_call", "web_search_call")


def _is_output(item: dict[str, Any]) -> bool:
    kind = item.get("type", "message")
    return kind in OUTPUT_ITEMS or (kind == "message" and item.get("role") == "assistant")


def _instructions(meta: dict[str, Any]) -> str | None:
    raw = meta.get("base_instructions", meta.get("instructions"))
    if isinstance(raw, dict):
        raw = raw.get("text")
    return raw if isinstance(raw, str) and raw else None


def _item(item: Any) -> dict[str, Any]:
    """A rollout item as the Responses parser takes it (outputs recorded as objects become their text)."""
    item = expect(item, dict, "payload")
    output = item.get("output")
    if isinstance(output, dict) and isinstance(output.get("content"), str):
        return item | {"output": output["content"]}
    return item


class _Rollout:
    def __init__(self, path: Path, supplied: Supplied) -> None:
        self.path, self.supplied = path, supplied
        self.session, self.instructions, self.model = str(path), None, None
        self.items: list[tuple[int, dict[str, Any]]] = []  # (line, item) of the history so far
        self.closed = 0  # items already part of an earlier call
        self.skipped: Counter[str] = Counter()
        self.requests: list[TraceRequest] = []
        self.times: dict[int, float] = {}  # line -> when it was written

    def line(self, n: int, raw: Any) -> None:
        kind, payload = expect(raw, dict, "line").get("type"), raw.get("payload")
        if kind == "session_meta":
            meta = expect(payload, dict, "payload")
            self.session, self.instructions = str(meta.get("id") or self.session), _instructions(meta)
        elif kind == "turn_context":
            model = expect(payload, dict, "payload").get("model")
            self.model = model if isinstance(model, str) else self.model
        elif kind == "response_item":
            self.items.append((n, _item(payload)))
        elif kind == "compacted":
            self._compact(n, expect(payload, dict, "payload"))
        elif kind == "event_msg" and isinstance(payload, dict) and payload.get("type") == "token_count":
            self._call(n, raw, payload)
        else:
            self.skipped[f"{kind} {payload.get('type')}" if isinstance(payload, dict) else str(kind)] += 1

    def _compact(self, n: int, payload: dict[str, Any]) -> None:
        history = payload.get("replacement_history")
        if isinstance(history, list):
            self.items = [(n, _item(x)) for x in history]
        else:
            summary = expect(payload.get("message"), str, "payload.message")
            self.items = [
                (n, {"type": "message", "role": "user", "content": [{"type": "input_text", "text": summary}]})
            ]
        self.closed = len(self.items)

    def _call(self, n: int, raw: dict[str, Any], payload: dict[str, Any]) -> None:
        info = payload.get("info")
        if not isinstance(info, dict) or len(self.items) == self.closed:
            self.skipped["token_count without new usage"] += 1
            return
        last = expect(info.get("last_token_usage"), dict, "payload.info.last_token_usage")
        at = "payload.info.last_token_usage"
        usage = RecordedUsage(
            "openai",
            self.model,
            prompt_tokens=count(last, "input_tokens", at),
            cache_read_tokens=count(last, "cached_input_tokens", at),
            output_tokens=count(last, "output_tokens", at),
        )
        split = len(self.items)
        while split > self.closed and _is_output(self.items[split - 1][1]):
            split -= 1
        inputs = self.items[:split]
        body: dict[str, Any] = {"model": self.model, "input": [item for _, item in inputs]}
        instructions = self.instructions if self.instructions is not None else self.supplied.system
        if instructions is not None:
            body["instructions"] = instructions
        if self.supplied.tools is not None:
            body["tools"] = self.supplied.responses_tools()
        try:
            req = parse_responses(body)
        except FieldError as e:
            raise TraceError(self._located(e, inputs, n)) from None
        sent = inputs[-1][0] if inputs else n
        previous = self.requests[-1].request_id if self.requests else None
        self.requests.append(
            replace(
                req,
                timestamp=self.times.get(sent),
                session=self.session,
                request_id=f"{self.session}#{len(self.requests) + 1}",
                parent_id=previous,
                missing=self.supplied.missing(holds_system=self.instructions is not None),
                recorded=usage,
            )
        )
        self.closed = len(self.items)

    def _located(self, e: FieldError, inputs: list[tuple[int, dict[str, Any]]], n: int) -> str:
        """`input[i]...` of the rebuilt body, at the line item i was recorded on."""
        if e.field_path.startswith("input[") and "]" in e.field_path:
            i = int(e.field_path[6 : e.field_path.index("]")])
            return f"{self.path}: line {inputs[i][0]}: payload{e.field_path[e.field_path.index(']') + 1 :]}: {e.problem}"
        return f"{self.path}: line {n}: {e}"


def read_codex(path: Path, supplied: Supplied | None = None) -> Read:
    rollout = _Rollout(path, supplied or Supplied())
    for n, raw in json_lines(path):
        try:
            if isinstance(raw, dict) and raw.get("timestamp") is not None:
                rollout.times[n] = seconds(raw["timestamp"], "timestamp")
            rollout.line(n, raw)
        except FieldError as e:
            raise TraceError(f"{path}: line {n}: {e}") from None
    notes = counted("rollout lines", dict(rollout.skipped))
    if "system" in (rollout.requests[0].missing if rollout.requests else ()):
        notes.append("the rollout records no base instructions: analysed without a system prompt")
    return Read(rollout.requests, notes)
