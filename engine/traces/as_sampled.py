"""The replies engine.serve rendered back as their model sampled them, read from its `--record` lines, so
that a replay renders each prompt as the server did (engine/prompts/sampled.py):

- `sampled`: the reply the line's response gave out, `{"ids": [...], "text": "...", "calls": [{"id",
  "raw"}]}` (every token sampled, the text given out, each tool call's raw text by its id);
- `as_sampled`: the messages of the line's request the server rendered from an earlier line's reply,
  `[{"message": i, "reply": REQUEST_ID, "as": "calls" | "text" | "tokens"}]`, `reply` naming that line by
  its `kvtestbed.request_id`.

A line without them (an older record, another proxy's) is rendered by the chat template, and so is a
message whose reply no line of the file holds, or that no longer carries the calls it names.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from engine.prompts.sampled import CALLS, HOW, SampledReply, SampledUse, substituted
from engine.traces.fields import FieldError, expect
from engine.traces.request import TraceRequest

SAMPLED, AS_SAMPLED, SERVER = "sampled", "as_sampled", "kvtestbed"


def sampled_reply(entry: Any) -> SampledReply | None:
    """The reply a record line's response gave out; None where the line holds none."""
    if not isinstance(entry, dict) or entry.get(SAMPLED) is None:
        return None
    data = expect(entry[SAMPLED], dict, SAMPLED)
    ids = expect(data.get("ids"), list, f"{SAMPLED}.ids")
    if not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in ids):
        raise FieldError(f"{SAMPLED}.ids", "expected token ids (non-negative integers)")
    calls = {}
    for j, call in enumerate(expect(data.get("calls", []), list, f"{SAMPLED}.calls")):
        where = f"{SAMPLED}.calls[{j}]"
        expect(call, dict, where)
        calls[expect(call.get("id"), str, f"{where}.id")] = expect(call.get("raw"), str, f"{where}.raw")
    server = entry.get(SERVER) if isinstance(entry.get(SERVER), dict) else {}
    request_id = expect(server.get("request_id"), str, f"{SERVER}.request_id")
    return SampledReply(request_id, expect(data.get("text"), str, f"{SAMPLED}.text"), tuple(ids), calls)


class SampledReplies:
    """Every reply the file's lines hold, by the request id that gave it out."""

    def __init__(self, entries: list[Any]) -> None:
        self.replies: dict[str, SampledReply] = {}
        for entry in entries:
            try:
                reply = sampled_reply(entry)
            except FieldError:
                continue  # refused naming its line when the line itself is read
            if reply is not None:
                self.replies[reply.request_id] = reply

    def apply(self, entry: Any, req: TraceRequest) -> TraceRequest:
        """`req`, read from record line `entry`, with its messages as the server rendered them and the
        reply its response gave out."""
        own = sampled_reply(entry)
        listed = entry.get(AS_SAMPLED) if isinstance(entry, dict) else None
        uses = []
        for j, item in enumerate(expect(listed or [], list, AS_SAMPLED)):
            where = f"{AS_SAMPLED}[{j}]"
            expect(item, dict, where)
            i, how = item.get("message"), item.get("as")
            if not isinstance(i, int) or isinstance(i, bool) or how not in HOW:
                raise FieldError(where, f"expected a message index and one of {', '.join(HOW)} as `as`")
            reply = self.replies.get(expect(item.get("reply"), str, f"{where}.reply"))
            if reply is not None and self._fits(req, i, reply, how):
                uses.append(SampledUse(i, reply, how))
        if not uses and own is None:
            return req
        return replace(req, messages=substituted(req.messages, uses), as_sampled=tuple(uses), sampled=own)

    @staticmethod
    def _fits(req: TraceRequest, i: int, reply: SampledReply, how: str) -> bool:
        if not 0 <= i < len(req.messages) or req.messages[i]["role"] != "assistant":
            return False
        calls = req.messages[i].get("tool_calls") or []
        return how != CALLS or all(c.get("id") in reply.raw_calls for c in calls)
