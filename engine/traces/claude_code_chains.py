"""The Anthropic messages of Claude Code chains (`engine.traces.claude_code` reads requests off them): the
blocks of one response merged back into one message (every line of it, also those the chain does not pass),
the results of its tool calls (the chain's result records and their siblings) merged into one user turn in
the order written, a result given twice kept once, synthetic responses left out.

A request's messages are those of the request it continues and a few more: each chain is built on from the
last record it shares with a chain built before, its message objects shared with that chain, never copied
(and never changed once a chain holds them: a merged turn that grows is a new message). Reading a
transcript costs its records once, not once per request that holds them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.traces.claude_code_tree import Record, Transcripts, content_blocks


@dataclass
class Built:
    """The Anthropic messages of a chain through one of its records, and what its next record needs."""

    messages: list[dict[str, Any]]
    owners: list[list[tuple[Record, int]]]  # per block of each message: the record and index it came from
    calls: list[Record]  # the assistant records of the last response
    answered: set[str] | None  # the results the last message holds, when it is their merged turn


class ChainMessages:
    """The messages of the chains of one book of transcripts, each built on from the chains before it."""

    def __init__(self, book: Transcripts) -> None:
        self.book = book
        self.built: dict[str, Built] = {}  # record uuid -> the chain's messages through it

    def messages(self, history: list[Record]) -> Built:
        start, at = 0, Built([], [], [], None)
        for k in range(len(history) - 1, -1, -1):
            known = self.built.get(history[k].uuid)
            if known is not None:
                start = k + 1
                at = Built(list(known.messages), list(known.owners), known.calls, known.answered)
                break
        for rec in history[start:]:
            self._add(at, rec)
        if history:
            self.built[history[-1].uuid] = at
        return at

    def _add(self, at: Built, rec: Record) -> None:
        book, messages, owners = self.book, at.messages, at.owners
        if rec.kind == "assistant" and rec.response is None:
            return
        if rec.kind == "assistant" and at.calls and rec.response == at.calls[-1].response:
            return  # its blocks are in the message already
        if rec.kind == "assistant":  # every line of the response, wherever the chain branched off them
            at.calls, at.answered = book.lines[rec.session, rec.response], None
            blocks = book.response_blocks(rec.session, rec.response)
            messages.append({"role": "assistant", "content": [b for _, _, b in blocks]})
            owners.append([(line, j) for line, j, _ in blocks])
            return
        if rec.kind == "user" and set(rec.answers) & {i for c in at.calls for i in c.calls}:
            if at.answered is None:
                parts = sorted(
                    {r.uuid: r for r in [*book.results(at.calls), rec]}.values(), key=lambda r: r.seq
                )
                messages.append({"role": "user", "content": []})
                owners.append([])
                at.answered = set()
            else:  # the chain goes on through another result record of the same calls: the turn copied
                parts = [rec]
                messages[-1] = {"role": "user", "content": list(messages[-1]["content"])}
                owners[-1], at.answered = list(owners[-1]), set(at.answered)
            for part in parts:
                for j, block in enumerate(content_blocks(part)):
                    if block.get("type") == "tool_result":
                        if block.get("tool_use_id") in at.answered:
                            continue
                        at.answered.add(block.get("tool_use_id"))
                    messages[-1]["content"].append(block)
                    owners[-1].append((part, j))
            return
        content = rec.message.get("content")
        blocks = [(rec, j) for j in range(len(content))] if isinstance(content, list) else [(rec, 0)]
        role = rec.message.get("role", rec.kind)
        messages.append({"role": role, "content": list(content) if isinstance(content, list) else content})
        owners.append(blocks)
        at.calls, at.answered = [], None
