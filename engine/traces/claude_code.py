"""Claude Code transcripts (`~/.claude/projects/<project>/<session>.jsonl`, subagents under
`<session>/subagents/agent-<id>.jsonl`) -> `TraceRequest`s, one per API request the session made.

A transcript is a tree of records linked by `parentUuid`. Every assistant record is one content block of a
response, all the blocks of one response repeating its `message.id`, `requestId` and `usage` (an early
streaming line may carry a lower `output_tokens`): one request per response, its usage taken from the line
with the most output. A request's messages are the user and assistant records from the root of its chain to
the response's parent, the blocks of one response merged back into one message; the chain runs
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
no messages (attachments, summaries, file-history snapshots, queue operations, system records). A request
shares the message objects of the request it continues (`engine.traces.claude_code_chains`), and each message,
like the supplied system prompt and tools, is parsed once (`anthropic_messages.ParseMemo`): reading costs each
record once, not once per request that holds it.

Not in a transcript: the system prompt and the tool definitions (`--system-file`, `--tools-file`); what
Claude Code rendered of an attachment into the prompt (the agent and skill listings, an edited file, hook
context: a request whose chain passed one is marked missing `attachments`); and the request bodies'
`cache_control`: modelled as Claude Code sends them, a breakpoint on the system prompt when
one is supplied and automatic caching at the last block, for the TTL the recorded writes name (1 hour when
the response wrote 1-hour entries, else 5 minutes).
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from engine.errors import TraceError
from engine.traces.anthropic_messages import ParseMemo, parse_anthropic
from engine.traces.claude_code_chains import ChainMessages
from engine.traces.claude_code_tree import Record, Transcripts
from engine.traces.fields import FieldError
from engine.traces.records import Read, counted
from engine.traces.request import TraceRequest
from engine.traces.supplied import Supplied
from engine.traces.usage import anthropic_usage

MESSAGE_FIELD = re.compile(r"^messages\[(\d+)\]\.content(.*)$")


def _ttl(usage: dict[str, Any]) -> str:
    split = usage.get("cache_creation") if isinstance(usage.get("cache_creation"), dict) else {}
    return "1h" if (split.get("ephemeral_1h_input_tokens") or 0) > 0 else "5m"


def read_claude_code(paths: list[Path], supplied: Supplied | None = None) -> Read:
    """Every request of the transcripts, once, in the order their responses appear."""
    supplied = supplied or Supplied()
    book = Transcripts(sorted(paths))
    reader = _Reader(book, supplied)
    responses: dict[str, list[Record]] = {}
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
        req = reader.request(first, best)
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


class _Reader:
    """What the requests of one book share: the chains built so far, the parts of bodies parsed so far, and
    the supplied system prompt and tools, one object each (parsed once)."""

    def __init__(self, book: Transcripts, supplied: Supplied) -> None:
        self.book, self.supplied = book, supplied
        self.chains, self.memo = ChainMessages(book), ParseMemo()
        self.fixed: dict[str, Any] = {}
        if supplied.system is not None:
            system = {"type": "text", "text": supplied.system, "cache_control": {"type": "ephemeral"}}
            self.fixed["system"] = [system]
        if supplied.tools is not None:
            self.fixed["tools"] = supplied.anthropic_tools()

    def request(self, first: Record, best: Record) -> TraceRequest | None:
        """The request a response answered; None when its chain holds no message to send (counted)."""
        book = self.book
        chain = book.history(first)
        built = self.chains.messages(chain.messages)
        if not built.messages:
            return None
        raw_usage = best.message.get("usage") or {}
        body: dict[str, Any] = {
            "model": first.message.get("model"),
            "messages": built.messages,
            "cache_control": {"type": "ephemeral", "ttl": _ttl(raw_usage)},
        } | self.fixed
        try:
            req = parse_anthropic(body, self.memo)
        except FieldError as e:
            raise TraceError(_located(e, built.owners, first)) from None
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
            missing=self.supplied.missing(holds_system=False)
            + (("attachments",) if chain.attachments else ()),
            recorded=usage,
        )


def _located(e: FieldError, owners: list[list[tuple[Record, int]]], first: Record) -> str:
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
