"""A Claude Code project as the reader tests write it: duplicated assistant lines per content block (a
streaming partial first), a sidechain, a resumed session copying history, a compact boundary, an idle gap
over 5 minutes, a <synthetic> response and non-message records; and a Claude Code 2.1 session, whose chains run
through attachment, progress and system records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.traces.agent_common import MODEL, SOURCE, anthropic_usage, at, tool_result, tool_use, write_jsonl


class ClaudeCode:
    """Records of one transcript file, each linked to the previous one of its chain."""

    def __init__(self, session: str) -> None:
        self.session, self.rows, self.last = session, [], None
        self.n, self.prefix = 0, session  # uuids are <prefix>-001, ...

    def _add(self, kind: str, t: float, parent: str | None = "", **fields: Any) -> str:
        self.n += 1
        uuid = f"{self.prefix}-{self.n:03d}"
        row = {"type": kind, "uuid": uuid, "parentUuid": self.last if parent == "" else parent}
        row |= {
            "sessionId": self.session,
            "timestamp": at(t),
            "isSidechain": False,
            "cwd": "/repo",
            "version": "2.0.31",
        }
        self.rows.append(row | fields)
        self.last = uuid
        return uuid

    def user(self, t: float, content: Any, **fields: Any) -> str:
        return self._add("user", t, message={"role": "user", "content": content}, **fields)

    def response(
        self, t: float, msg_id: str, blocks: list[dict[str, Any]], usage: dict[str, Any], **fields: Any
    ) -> None:
        """One API response: a line per content block, each repeating the id, request id and usage; the
        first line a streaming partial with a lower output count."""
        for k, block in enumerate(blocks):
            partial = usage | {"output_tokens": 1} if k == 0 and len(blocks) > 1 else usage
            message = {
                "id": msg_id,
                "type": "message",
                "role": "assistant",
                "model": MODEL,
                "content": [block],
            }
            message |= {"stop_reason": None if k < len(blocks) - 1 else "tool_use", "usage": partial}
            self._add("assistant", t + 0.1 * k, message=message, requestId=f"req_{msg_id}", **fields)

    def synthetic(self, t: float, text: str) -> None:
        message = {
            "id": "synthetic-1",
            "role": "assistant",
            "model": "<synthetic>",
            "content": [{"type": "text", "text": text}],
        }
        message["usage"] = {"input_tokens": 0, "output_tokens": 0}
        self._add("assistant", t, message=message)

    def other(self, kind: str, t: float, **fields: Any) -> None:
        """A non-message record (not part of the chain)."""
        self.rows.append({"type": kind, "timestamp": at(t), "sessionId": self.session} | fields)


def claude_code_project(folder: Path) -> Path:
    """Two transcripts of one project: session A (its requests a1 a2 [synthetic] a4 a5, compact, a6, and
    a sidechain s1) and session B, a resume of A's pre-compaction history (copied, new uuids) going on
    with b7. Requests 1 s..25 min in; an idle gap of 7 minutes before a4."""
    a = ClaudeCode("session-a")
    a.other("summary", 0, summary="Fixing the date parser", leafUuid="x")
    a.other("file-history-snapshot", 0, messageId="m0", snapshot={})
    a.user(1, "The test tests/test_iso.py fails. Find the parser and fix it.")
    a.response(
        2,
        "msg_a1",
        [
            {"type": "thinking", "thinking": "Read it.", "signature": "s"},
            {"type": "text", "text": "Reading the parser."},
            tool_use("t1", "iso.py"),
        ],
        anthropic_usage(0, 2997),
    )
    a.user(5, tool_result("t1", SOURCE), toolUseResult={"type": "text"})
    a.response(
        6,
        "msg_a2",
        [{"type": "text", "text": "Now the test."}, tool_use("t2", "tests/test_iso.py")],
        anthropic_usage(2997, 1800),
    )
    a.user(9, tool_result("t2", "def test_parse(): assert parse_1('2026-01-01Z')"))
    a.other("queue-operation", 9, operation="enqueue", content="later")
    a.other("system", 9, subtype="turn_duration", durationMs=8000)
    a.user(10, "[Request interrupted by user]")
    a.synthetic(10, "No response requested.")
    a.user(430, "Go on: the Z suffix is the problem.")  # 7 minutes idle
    a.response(
        431,
        "msg_a4",
        [{"type": "text", "text": "Fixing the format."}, tool_use("t3", "iso.py")],
        anthropic_usage(0, 4997),
    )
    a.user(433, tool_result("t3", "ok"))
    a.response(
        434,
        "msg_a5",
        [{"type": "text", "text": "Fixed: the format now takes %z."}],
        anthropic_usage(4997, 600, hour=True),
    )
    before_compact, history = a.last, [r for r in a.rows if r["type"] in ("user", "assistant")]
    boundary = a._add(
        "system",
        600,
        parent=None,
        subtype="compact_boundary",
        logicalParentUuid=before_compact,
        compactMetadata={"trigger": "manual", "preTokens": 5600},
    )
    a.user(
        601,
        "This session is being continued from a previous conversation. Summary: the parser takes %z now.",
        isCompactSummary=True,
        parent=boundary,
    )
    a.response(602, "msg_a6", [{"type": "text", "text": "Anything else to check?"}], anthropic_usage(0, 400))
    a.last = None  # a subagent's sidechain, a chain of its own
    side = {"isSidechain": True, "agentId": "f00d"}
    a.user(700, "Search the repository for other strptime calls.", **side)
    a.response(
        701,
        "msg_s1",
        [{"type": "text", "text": "Two more in utils.py."}],
        anthropic_usage(0, 0, fresh=300),
        **side,
    )
    write_jsonl(folder / "session-a.jsonl", a.rows)
    b = ClaudeCode("session-b")  # resumed from A before the compaction: history copied, new uuids
    for r in history:
        b.n += 1
        uuid = f"session-b-{b.n:03d}"
        b.rows.append(r | {"uuid": uuid, "parentUuid": b.last, "sessionId": "session-b"})
        b.last = uuid
    b.user(560, "Also cover the ISO week format.")
    b.response(561, "msg_b7", [{"type": "text", "text": "Adding %G-%V."}], anthropic_usage(5597, 200))
    write_jsonl(folder / "session-b.jsonl", b.rows)
    return folder


class ClaudeCode21(ClaudeCode):
    """Records as Claude Code 2.1 writes them: attachments, progress and system records inside the chains
    (a message's parent may be any of them), its 2.1 fields on every record."""

    def __init__(self, session: str, **common: Any) -> None:
        super().__init__(session)
        self.common = {"userType": "external", "entrypoint": "cli", "version": "2.1.197"} | common

    def _add(self, kind: str, t: float, parent: str | None = "", **fields: Any) -> str:
        return super()._add(kind, t, parent, **(self.common | fields))

    def attachment(self, t: float, attachment: dict[str, Any]) -> str:
        return self._add("attachment", t, attachment=attachment)


def claude_code_21_project(folder: Path) -> Path:
    """A Claude Code 2.1 session: its prompt followed by two attachments (the agent and skill listings), a
    tool call with a hook's progress record beside it, a `turn_duration` system record that the next prompt
    continues, a compaction (boundary, summary, a file re-attached), and a subagent's sidechain in
    `subagents/` with its `.meta.json`."""
    s = ClaudeCode21("session-c")
    s.other("queue-operation", 0, operation="enqueue", content="Fix the parser.")
    s.other("queue-operation", 0, operation="dequeue")
    s.user(1, "The test tests/test_iso.py fails. Find the parser and fix it.", promptId="p1")
    s.attachment(1.1, {"type": "agent_listing_delta", "addedTypes": ["Explore"], "isInitial": True})
    s.attachment(1.2, {"type": "skill_listing", "content": "- verify: Verify a change."})
    s.response(2, "msg_c1", [tool_use("t1", "iso.py")], anthropic_usage(0, 2997))
    call = s.last
    s._add("progress", 2.5, data={"type": "hook_progress", "hookEvent": "PreToolUse"}, toolUseID="t1")
    s.last = call  # the tool's result continues the call, not the progress record
    s.user(3, tool_result("t1", SOURCE), toolUseResult={"type": "text"}, sourceToolAssistantUUID=call)
    s.response(
        4, "msg_c2", [{"type": "text", "text": "The Z suffix is the problem."}], anthropic_usage(2997, 900)
    )
    s._add("system", 4.5, subtype="turn_duration", durationMs=3500, isMeta=False)
    s.user(60, "Fix it then.", promptId="p2")  # its parent is the turn_duration record
    s.attachment(60.1, {"type": "edited_text_file", "filename": "iso.py", "snippet": "1\tdef parse"})
    s.response(
        61, "msg_c3", [{"type": "text", "text": "Fixed: the format takes %z."}], anthropic_usage(3897, 300)
    )
    boundary = s._add(
        "system",
        600,
        parent=None,
        subtype="compact_boundary",
        content="Conversation compacted",
        logicalParentUuid=s.last,
        compactMetadata={"trigger": "auto", "preTokens": 4300},
    )
    s.user(
        601,
        "This session is being continued from a previous conversation. Summary: the parser takes %z now.",
        parent=boundary,
        isCompactSummary=True,
    )
    s.attachment(601.1, {"type": "compact_file_reference", "filename": "iso.py"})
    s.response(602, "msg_c4", [{"type": "text", "text": "Anything else to check?"}], anthropic_usage(0, 400))
    s.other("last-prompt", 602, lastPrompt="Fix it then.", leafUuid=s.last)
    write_jsonl(folder / "session-c.jsonl", s.rows)
    side = ClaudeCode21("session-c", isSidechain=True, agentId="a1f")
    side.prefix = "agent-a1f"
    side.user(700, "Search the repository for other strptime calls.")
    side.attachment(700.1, {"type": "skill_listing", "content": "- verify: Verify a change."})
    side.response(701, "msg_s1", [tool_use("t9", "utils.py")], anthropic_usage(0, 0, fresh=300))
    side.user(702, tool_result("t9", "strptime(x, '%Y')"))
    side.response(
        703, "msg_s2", [{"type": "text", "text": "One more in utils.py."}], anthropic_usage(0, 0, fresh=330)
    )
    write_jsonl(folder / "session-c" / "subagents" / "agent-a1f.jsonl", side.rows)
    meta = {"agentType": "Explore", "description": "search", "toolUseId": "t8", "spawnDepth": 1}
    (folder / "session-c" / "subagents" / "agent-a1f.meta.json").write_text(json.dumps(meta))
    return folder


def claude_code_parallel_calls(folder: Path) -> Path:
    """A Claude Code 2.1 session with parallel tool calls: one response calls three tools (a line per
    block), each result a user record of its own hanging off the line of its call (the second through a
    hook's progress record), written out of call order; the chain goes on through the last one written.
    A second response calls two tools and only one result was written."""
    s = ClaudeCode21("session-p")
    s.user(1, "Read the three parser files.")
    s.response(2, "msg_p1", [tool_use("t1", "a.py"), tool_use("t2", "b.py"), tool_use("t3", "c.py")], {})
    lines = [r["uuid"] for r in s.rows if r["type"] == "assistant"]
    s.user(3, tool_result("t3", "C"), parent=lines[2], sourceToolAssistantUUID=lines[2])
    s._add("progress", 3.1, parent=lines[1], data={"type": "hook_progress"}, toolUseID="t2")
    s.user(3.2, tool_result("t2", "B"), sourceToolAssistantUUID=lines[1])
    s.user(3.3, tool_result("t1", "A"), parent=lines[0], sourceToolAssistantUUID=lines[0])
    s.response(4, "msg_p2", [tool_use("t4", "d.py"), tool_use("t5", "e.py")], anthropic_usage(0, 900))
    s.user(5, tool_result("t5", "E"))
    s.response(6, "msg_p3", [{"type": "text", "text": "Done."}], anthropic_usage(900, 100))
    return write_jsonl(folder / "session-p.jsonl", s.rows)
