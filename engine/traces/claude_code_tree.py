"""The records of Claude Code transcripts as a tree (`engine.traces.claude_code` reads requests off it):
each record kept once by its `uuid` (the first copy, oldest file first), linked to its parent
(`parentUuid`), its children indexed, and each response's lines (one per content block) gathered. A chain
that loops is refused naming the line where it does."""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import TraceError
from engine.traces.fields import FieldError, expect
from engine.traces.records import json_lines, seconds

SYNTHETIC = "<synthetic>"


@dataclass
class Record:
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
            b["id"]
            for b in content_blocks(self)
            if b.get("type") == "tool_use" and isinstance(b.get("id"), str)
        ]

    @property
    def answers(self) -> list[str]:
        """The `tool_use_id`s of the `tool_result` blocks of a user record."""
        if self.kind != "user":
            return []
        return [b.get("tool_use_id") for b in content_blocks(self) if b.get("type") == "tool_result"]

    @property
    def response(self) -> str | None:
        """The response an assistant record belongs to (None for other records and synthetic ones)."""
        if self.kind != "assistant" or self.message.get("model") == SYNTHETIC:
            return None
        return str(self.message.get("id"))

    def where(self, field_path: str) -> str:
        return f"{self.path}: line {self.line}: {field_path}"


def content_blocks(rec: Record) -> list[dict[str, Any]]:
    content = rec.message.get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def read_record(path: Path, line: int, raw: Any, skipped: Counter) -> Record | None:
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
    return Record(
        path, line, uuid, parents[0], kind, message, when, session, parents[1], raw.get("requestId")
    )


@dataclass
class Chain:
    """The records before a response in its chain, back to a compact boundary or the root."""

    messages: list[Record]  # the user and assistant records, oldest first
    broken: bool  # the chain names a parent the files do not hold
    attachments: bool  # it passes attachment records (what Claude Code made of them is not recorded)
    time: float | None  # when the record right before the response was written


class Transcripts:
    """Every record of the files, by uuid (the first copy of a uuid kept)."""

    def __init__(self, paths: list[Path]) -> None:
        self.records: dict[str, Record] = {}
        self.order: list[Record] = []
        self.children: dict[str, list[Record]] = {}  # parent uuid -> its records, in order
        self.lines: dict[tuple[str, str], list[Record]] = {}  # (session, response) -> its lines, in order
        self.blocks: dict[tuple[str, str], list[tuple[Record, int, dict[str, Any]]]] = {}  # response_blocks
        self.skipped: Counter[str] = Counter()
        files = [
            [r for line, raw in json_lines(p) if (r := read_record(p, line, raw, self.skipped))]
            for p in paths
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

    def _parent(self, rec: Record, link: str | None, seen: set[str]) -> Record | None:
        """The record `link` names (None where the files do not hold it); a chain that comes back to a
        record it passed is refused, naming the line where it loops."""
        if link in seen:
            raise TraceError(rec.where(f"parentUuid: the chain loops back to {link}"))
        seen.add(link)
        return self.records.get(link)

    def history(self, rec: Record) -> Chain:
        """The chain before `rec` (see `Chain`)."""
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
        return Chain(out[::-1], broken, attachments, time)

    def response_blocks(self, session: str, response: str) -> list[tuple[Record, int, dict[str, Any]]]:
        """(line, index in it, block) of every content block of a response, a block repeated on two lines
        kept once; worked out once per response (every later request's history holds it)."""
        key = (session, response)
        if key not in self.blocks:
            found: dict[str, tuple[Record, int, dict[str, Any]]] = {}
            for line in self.lines[key]:
                for j, block in enumerate(content_blocks(line)):
                    found.setdefault(json.dumps(block, sort_keys=True), (line, j, block))
            self.blocks[key] = list(found.values())
        return self.blocks[key]

    def results(self, calls: list[Record]) -> list[Record]:
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

    def parent_response(self, rec: Record) -> tuple[str | None, bool]:
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
