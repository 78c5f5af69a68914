"""Responses continuations in the server's own record (`engine.serve --record`), rebuilt whole.

A line whose request continued an earlier response by `previous_response_id` holds the body as its client sent
it (the id, and only the new input) and `continues`: `{"id", "items", "kvtestbed_digest", "bytes"}`, the
response continued, how many items of its conversation the server put before the new input, and their digest
(SHA-256 of their compact UTF-8 JSON, `digest`). The line of a kept response holds its output items
(`output`), and its id is its report's `request_id`. The body the server rendered is rebuilt here before any
parser reads it: the continued response's conversation (its own input, rebuilt the same way, then its output;
items no prompt renders left out, as the server keeps none), then the new input, with no
`previous_response_id`. A line continuing a response the file does not hold (or holds without its output) is
refused naming the id, and so is a rebuilt conversation whose digest is not the one the server recorded. Lines
without `continues` (other formats, first turns, records written before it existed) are left as they are.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from engine.traces.envelope import SERVER
from engine.traces.fields import FieldError, expect
from engine.traces.responses import rendered_items

DIGEST = "kvtestbed_digest"


def compact(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def digest(value: Any) -> dict[str, Any]:
    """`{"kvtestbed_digest": "sha256:HEX", "bytes": N}` of `value`'s compact UTF-8 JSON (N bytes)."""
    data = compact(value)
    return {DIGEST: f"sha256:{hashlib.sha256(data).hexdigest()}", "bytes": len(data)}


class ChainRebuilder:
    """The entries of one file, indexed by the response each recorded (where it kept its output)."""

    def __init__(self, entries: list[Any]) -> None:
        self.entries = entries
        self.lines: dict[str, int] = {}  # response id -> its line (index into entries)
        for i, entry in enumerate(entries):
            report = entry.get(SERVER) if isinstance(entry, dict) else None
            rid = report.get("request_id") if isinstance(report, dict) else None
            if isinstance(rid, str) and isinstance(entry.get("output"), list):
                self.lines.setdefault(rid, i)
        self.conversations: dict[
            str, list[Any]
        ] = {}  # response id -> its conversation, as the server kept it

    def whole(self, entry: Any) -> Any:
        """`entry` with the whole input its server rendered; itself where it continues nothing."""
        if not isinstance(entry, dict) or entry.get("continues") is None:
            return entry
        continues = expect(entry["continues"], dict, "continues")
        history = self._conversation(expect(continues.get("id"), str, "continues.id"))
        if DIGEST in continues and digest(history) != {k: continues.get(k) for k in (DIGEST, "bytes")}:
            raise FieldError(
                "continues",
                f"the conversation rebuilt for response {continues['id']!r:.80} is not the one the server "
                f"continued ({continues[DIGEST]!s:.80}): the file does not hold that response as served",
            )
        body = {
            k: v for k, v in expect(entry.get("body"), dict, "body").items() if k != "previous_response_id"
        }
        return entry | {"body": body | {"input": history + _input(body)}}

    def _conversation(self, rid: str) -> list[Any]:
        """What the server kept of response `rid`: its whole input, then its output, the unrendered items left
        out. Walked back to the first response of the chain (or one already rebuilt), then rebuilt forwards."""
        first, chain, seen = rid, [], set()
        while rid not in self.conversations:
            if rid in seen:
                raise FieldError("continues.id", f"the chain of responses loops back to {rid!r:.80}")
            if rid not in self.lines:
                raise FieldError(
                    "continues.id",
                    f"continues response {rid!r:.80} (previous_response_id), which the file does not hold with "
                    "its output: give the record from the chain's first response on",
                )
            chain.append(rid)
            seen.add(rid)
            continues = self.entries[self.lines[rid]].get("continues")
            if continues is None:
                break
            rid = expect(expect(continues, dict, "continues").get("id"), str, "continues.id")
        for kept in reversed(chain):
            entry = self.whole(self.entries[self.lines[kept]])  # its own history is rebuilt by now
            items = _input(expect(entry.get("body"), dict, "body")) + entry["output"]
            self.conversations[kept] = rendered_items(items)
        return self.conversations[first]


def _input(body: dict[str, Any]) -> list[Any]:
    raw = body.get("input")
    if isinstance(raw, str):
        return [{"type": "message", "role": "user", "content": raw}]
    return list(raw) if isinstance(raw, list) else [] if raw is None else [raw]  # the parser names a bad one
