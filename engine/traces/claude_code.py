"""Claude Code transcripts (`~/.claude/projects/<project>/<session>.jsonl`, subagents under
`<session>/subagents/agent-<id>.jsonl`) -> `TraceRequest`s, one per API request the session made.

A transcript is a tree of records linked by `parentUuid`. Every assistant record is one content block of a
response, all the blocks of one response repeating its `message.id`, `requestId` and `usage` (an early
streaming line may carry a lower `output_tokens`): one request per response, its usage taken from the line
with the most output. A request's messages are the user and assistant records from the root of its chain to
the response's parent, consecutive blocks of one response merged back into one message; the chain runs
through the other records that carry a `uuid` (Claude Code 2.x puts attachments, progress and system records
such as `turn_duration` between messages, and the next message names one of them as its parent), which are
no messages. A `compact_boundary` record ends the history there (the compacted conversation starts anew)
while the request still continues the last one before it (`logicalParentUuid`). `<synthetic>` responses
(written by Claude Code, not the API) are neither requests nor history. Sidechains (subagents) are sessions
of their own. Files are read together: a resumed session copies history into its new file, and a response
seen once (`message.id` + `requestId`) is one request. Parallel tool calls: Claude Code writes each result as
a user record of its own, hanging off the response that made the calls, and the chain goes on through one of
them; it sends them all as one user turn. So a request's history holds, after each response, every result
record that answers one of its `tool_use` blocks (the chain's own and its siblings), merged into one user
message in the order they were written, and the response itself whole (every line of it, also those the
chain does not pass). A chain that loops is refused; a response whose chain
holds no message (its history is in no file given) is skipped and counted, and so are the records that are
no messages (attachments, summaries, file-history snapshots, queue operations, system records).

Not in a transcript: the system prompt and the tool definitions (`--system-file`, `--tools-file`); what
Claude Code rendered of an attachment into the prompt (the agent and skill listings, an edited file, hook
context: a request whose chain passed one is marked missing `attachments`); and the request bodies'
`cache_control`: modelled as Claude Code sends them, a breakpoint on the system prompt when
one is supplied and automatic caching at the last block, for the TTL the recorded writes name (1 hour when
the response wrote 1-hour entries, else 5 minutes).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from engine.errors import TraceError
from engine.traces.anthropic_messages import parse_anthropic
from engine.traces.fields import FieldError, expect
from engine.traces.records import Read, counted, json_lines, seconds
from engine.traces.request import TraceRequest
from engine.traces.supplied import Supplied
from engine.traces.usage import anthropic_usage

SYNTHETIC = "<synthetic>"
MESSAGE_FIELD = re.compile(r"^messages\[(\d+)\]\.content(.*)$")


@dataclass
class _Record:
    path: Path
    line: int
    uuid: str
    parent: str | None
    kind: str  # "user", "assistant" or "boundary"
    message: dict[str, Any]
    time: float | None
    session: str
    logical_parent: str | None = None
    request_id: str | None = None  # the API's requestId, on assistant records
    seq: int = 0  # its place among the records kept (the order they were written)

    @property
    def calls(self) -> list[str]:
        """The ids of the `tool_use` blocks of an assistant record."""
        return [
            b["id"] for b in _blocks(self) if b.get("type") == "tool_use" and isinstance(b.get("id"), str)
        ]

    @property
    def answers(self) -> list[str]:
        """The `tool_use_id`s of the `tool_result` blocks of a user record."""
        if self.kind != "user":
            return []
        return [b.get("tool_use_id") for b in _blocks(self) if b.get("type") == "tool_result"]

    @property
    def response(self) -> str | None:
        """The response an assistant record belongs to (None for other records and synthetic ones)."""
        if self.kind != "assistant" or self.message.get("model") == SYNTHETIC:
            return None
        return str(self.message.get("id"))

    def where(self, field_path: str) -> str:
        return f"{self.path}: line {self.line}: {field_path}"


def _blocks(rec: _Record) -> list[dict[str, Any]]:
    content = rec.message.get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _record(path: Path, line: int, raw: Any, skipped: Counter) -> _Record | None:
    """A message (`user`, `assistant`), a compact boundary, or another record of a chain (`link`: an
    attachment, a progress or system record, which Claude Code 2.x puts between messages); None for records
    outside the chains (summaries, snapshots, queue operations), which are counted."""
    where = f"{path}: line {line}"
    if not isinstance(raw, dict):
        raise TraceError(f"{where}: expected a JSON object, got {type(raw).__name__}")
    kind = raw.get("type")
    name = str(kind if kind != "system" else f"system {raw.get('subtype')}")
    if kind == "system" and raw.get("subtype") == "compact_boundary":
        kind = "boundary"
    elif kind not in ("user", "assistant"):
        skipped[name] += 1
        if not isinstance(raw.get("uuid"), str):
            return None
        kind = "attachment" if kind == "attachment" else "link"
    try:
        uuid = expect(raw.get("uuid"), str, "uuid")
        message = expect(raw.get("message"), dict, "message") if kind in ("user", "assistant") else {}
        if kind == "assistant" and message.get("model") != SYNTHETIC:
            expect(message.get("id"), str, "message.id")
            expect(message.get("content"), list, "message.content")
            if message.get("usage") is not None:
                expect(message["usage"], dict, "message.usage")
        when = seconds(raw["timestamp"], "timestamp") if raw.get("timestamp") is not None else None
    except FieldError as e:
        raise TraceError(f"{where}: {e}") from None
    session = str(raw.get("sessionId") or path)
    if raw.get("isSidechain"):
        session = f"{session}:agent-{raw.get('agentId') or path.stem}"
    parents = (raw.get("parentUuid"), raw.get("logicalParentUuid"))
    return _Record(
        path, line, uuid, parents[0], kind, message, when, session, parents[1], raw.get("requestId")
    )


@dataclass
class _Chain:
    """The records before a response in its chain, back to a compact boundary or the root."""

    messages: list[_Record]  # the user and assistant records, oldest first
    broken: bool  # the chain names a parent the files do not hold
    attachments: bool  # it passes attachment records (what Claude Code made of them is not recorded)
    time: float | None  # when the record right before the response was written


class _Transcripts:
    """Every record of the files, by uuid (the first copy of a uuid kept)."""

    def __init__(self, paths: list[Path]) -> None:
        self.records: dict[str, _Record] = {}
        self.order: list[_Record] = []
        self.children: dict[str, list[_Record]] = {}  # parent uuid -> its records, in order
        self.lines: dict[tuple[str, str], list[_Record]] = {}  # (session, response) -> its lines, in order
        self.skipped: Counter[str] = Counter()
        files = [
            [r for line, raw in json_lines(p) if (r := _record(p, line, raw, self.skipped))] for p in paths
        ]
        # oldest file first: a resumed session's copy of history comes after the original
        for recs in sorted(
            files, key=lambda rs: min((r.time for r in rs if r.time is not None), default=math.inf)
        ):
            for rec in recs:
                if rec.uuid not in self.records:
                    rec.seq = len(self.order)
                    self.records[rec.uuid] = rec
                    self.order.append(rec)
                    self.children.setdefault(rec.parent or "", []).append(rec)
                    if rec.response is not None:
                        self.lines.setdefault((rec.session, rec.response), []).append(rec)

    def _parent(self, rec: _Record, link: str | None, seen: set[str]) -> _Record | None:
        """The record `link` names (None where the files do not hold it); a chain that comes back to a
        record it passed is refused, naming the line where it loops."""
        if link in seen:
            raise TraceError(rec.where(f"parentUuid: the chain loops back to {link}"))
        seen.add(link)
        return self.records.get(link)

    def history(self, rec: _Record) -> _Chain:
        """The chain before `rec` (see `_Chain`)."""
        out, at, seen = [], rec, {rec.uuid}
        attachments, broken, time = False, False, None
        while at.parent is not None:
            prev = self._parent(at, at.parent, seen)
            if prev is None:
                broken = True
                break
            time = prev.time if at is rec else time
            if prev.kind == "boundary":
                break
            if prev.kind in ("user", "assistant"):
                out.append(prev)
            attachments |= prev.kind == "attachment"
            at = prev
        return _Chain(out[::-1], broken, attachments, time)

    def results(self, calls: list[_Record]) -> list[_Record]:
        """Every user record answering a `tool_use` of the assistant records `calls` (one response's, on a
        chain), among their descendants through records that are no messages, in the order written."""
        ids, found, todo = {i for r in calls for i in r.calls}, [], list(calls)
        while todo:
            for child in self.children.get(todo.pop().uuid, []):
                if child.kind == "user" and ids.intersection(child.answers):
                    found.append(child)
                elif child.kind in ("link", "attachment"):
                    todo.append(child)
        return sorted({r.uuid: r for r in found}.values(), key=lambda r: r.seq)

    def parent_response(self, rec: _Record) -> tuple[str | None, bool]:
        """The response this one's chain continues (across compact boundaries), and whether the chain
        breaks off at a record the files do not hold before reaching one."""
        at, link, seen = rec, rec.parent, {rec.uuid}
        while link is not None:
            prev = self._parent(at, link, seen)
            if prev is None:
                return None, True
            if prev.response is not None:
                return prev.response, False
            at, link = prev, prev.logical_parent if prev.kind == "boundary" else prev.parent
        return None, False


def _messages(
    book: _Transcripts, history: list[_Record]
) -> tuple[list[dict[str, Any]], list[list[tuple[_Record, int]]]]:
    """Anthropic messages of a chain: the blocks of one response merged, the results of its tool calls
    (the chain's records and their siblings) merged into one user turn, a result given twice kept once,
    synthetic responses left out; and for each block of each message, the record and the index in it it
    came from (for errors)."""
    messages: list[dict[str, Any]] = []
    owners: list[list[tuple[_Record, int]]] = []
    calls: list[_Record] = []  # the assistant records of the last response
    answered: set[str] | None = None  # the results the last message holds, when it is their merged turn
    for rec in history:
        if rec.kind == "assistant" and rec.response is None:
            continue
        if rec.kind == "assistant" and calls and rec.response == calls[-1].response:
            continue  # its blocks are in the message already
        if rec.kind == "assistant":  # every line of the response, wherever the chain branched off them
            calls, answered, blocks = book.lines[rec.session, rec.response], None, {}
            for line in calls:
                for j, block in enumerate(_blocks(line)):
                    blocks.setdefault(json.dumps(block, sort_keys=True), (line, j, block))
            messages.append({"role": "assistant", "content": [b for _, _, b in blocks.values()]})
            owners.append([(line, j) for line, j, _ in blocks.values()])
            continue
        if rec.kind == "user" and set(rec.answers) & {i for c in calls for i in c.calls}:
            if answered is None:
                parts = sorted({r.uuid: r for r in [*book.results(calls), rec]}.values(), key=lambda r: r.seq)
                messages.append({"role": "user", "content": []})
                owners.append([])
                answered = set()
            else:  # the chain goes on through another result record of the same calls
                parts = [rec]
            for part in parts:
                for j, block in enumerate(_blocks(part)):
                    if block.get("type") == "tool_result":
                        if block.get("tool_use_id") in answered:
                            continue
                        answered.add(block.get("tool_use_id"))
                    messages[-1]["content"].append(block)
                    owners[-1].append((part, j))
            continue
        content = rec.message.get("content")
        blocks = [(rec, j) for j in range(len(content))] if isinstance(content, list) else [(rec, 0)]
        role = rec.message.get("role", rec.kind)
        messages.append({"role": role, "content": list(content) if isinstance(content, list) else content})
        owners.append(blocks)
        calls, answered = [], None
    return messages, owners


def _ttl(usage: dict[str, Any]) -> str:
    split = usage.get("cache_creation") if isinstance(usage.get("cache_creation"), dict) else {}
    return "1h" if (split.get("ephemeral_1h_input_tokens") or 0) > 0 else "5m"


def read_claude_code(paths: list[Path], supplied: Supplied | None = None) -> Read:
    """Every request of the transcripts, once, in the order their responses appear."""
    supplied = supplied or Supplied()
    book = _Transcripts(sorted(paths))
    responses: dict[str, list[_Record]] = {}
    for rec in book.order:
        if rec.response is not None:
            responses.setdefault(rec.response, []).append(rec)
    out, seen, empty = [], set(), 0
    for lines in responses.values():
        first = lines[0]
        key = (first.response, first.request_id)
        best = max(lines, key=lambda r: (r.message.get("usage") or {}).get("output_tokens") or 0)
        if key in seen:
            continue
        seen.add(key)
        req = _request(book, first, best, supplied)
        empty += req is None
        out += [req] if req is not None else []
    notes = counted("transcript records that are no messages", dict(book.skipped))
    synthetic = sum(1 for r in book.order if r.kind == "assistant" and r.response is None)
    if synthetic:
        notes.append(f"skipped {synthetic} <synthetic> responses (written by Claude Code, not the API)")
    if empty:
        notes.append(
            f"skipped {empty} responses whose chain holds no message (their history is in no file given)"
        )
    if any("attachments" in r.missing for r in out):
        notes.append(
            "attachments (agent and skill listings, files, hook context) are recorded, not what Claude Code "
            "rendered of them into the prompt: requests after one are marked missing attachments"
        )
    return Read(out, notes)


def _request(book: _Transcripts, first: _Record, best: _Record, supplied: Supplied) -> TraceRequest | None:
    """The request a response answered; None when its chain holds no message to send (counted)."""
    chain = book.history(first)
    messages, owners = _messages(book, chain.messages)
    if not messages:
        return None
    raw_usage = best.message.get("usage") or {}
    body: dict[str, Any] = {
        "model": first.message.get("model"),
        "messages": messages,
        "cache_control": {"type": "ephemeral", "ttl": _ttl(raw_usage)},
    }
    if supplied.system is not None:
        body["system"] = [{"type": "text", "text": supplied.system, "cache_control": {"type": "ephemeral"}}]
    if supplied.tools is not None:
        body["tools"] = supplied.anthropic_tools()
    try:
        req = parse_anthropic(body)
    except FieldError as e:
        raise TraceError(_located(e, owners, first)) from None
    try:
        usage = anthropic_usage(raw_usage, body["model"], "message.usage") if raw_usage else None
    except FieldError as e:
        raise TraceError(best.where(str(e))) from None
    parent, missing = book.parent_response(first)
    return replace(
        req,
        timestamp=chain.time if chain.time is not None else first.time,
        session=first.session,
        request_id=first.response,
        parent_id=parent,
        parent_missing=missing or (chain.broken and parent is None),
        missing=supplied.missing(holds_system=False) + (("attachments",) if chain.attachments else ()),
        recorded=usage,
    )


def _located(e: FieldError, owners: list[list[tuple[_Record, int]]], first: _Record) -> str:
    """A parse error of the rebuilt body (`messages[i].content[j]...`) at the line and block it came from."""
    match = MESSAGE_FIELD.match(e.field_path)
    if match is None:
        return first.where(str(e))
    blocks, rest = owners[int(match.group(1))], match.group(2)
    index = re.match(r"^\[(\d+)\](.*)$", rest)
    if index is None:
        return f"{blocks[0][0].where('message.content' + rest)}: {e.problem}"
    rec, j = blocks[min(int(index.group(1)), len(blocks) - 1)]
    return f"{rec.where(f'message.content[{j}]{index.group(2)}')}: {e.problem}"
