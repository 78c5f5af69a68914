"""Claude Code transcripts: one request per response however many lines it took, chains rebuilt from
parentUuid (sidechains apart, compact boundaries honoured, resumed copies once), usage as recorded, and the
system prompt and tools supplied or marked missing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.errors import TraceError
from engine.traces.claude_code import read_claude_code
from engine.traces.inputs import load_inputs
from engine.traces.records import seconds
from engine.traces.supplied import Supplied
from tests.traces.agent_common import at
from tests.traces.write_claude_code import (
    claude_code_21_project,
    claude_code_parallel_calls,
    claude_code_project,
)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return claude_code_project(tmp_path_factory.mktemp("claude") / "project")


def read(project: Path, supplied: Supplied | None = None):
    return read_claude_code(sorted(project.glob("*.jsonl")), supplied)


def test_one_request_per_response_once(project: Path) -> None:
    got = read(project)
    ids = [r.request_id for r in got.requests]
    assert ids == ["msg_a1", "msg_a2", "msg_a4", "msg_a5", "msg_a6", "msg_s1", "msg_b7"]  # copies once
    assert all(
        r.recorded.output_tokens == 40 for r in got.requests
    )  # the final line's usage, not the partial
    assert any("1 file-history-snapshot, 1 queue-operation, 1 summary" in n for n in got.notes)
    assert any("<synthetic> responses" in n for n in got.notes)


def test_chains_sidechains_compaction_and_resume(project: Path) -> None:
    by = {r.request_id: r for r in read(project).requests}
    assert [by[k].parent_id for k in ("msg_a1", "msg_a2", "msg_a4", "msg_a5")] == [
        None,
        "msg_a1",
        "msg_a2",
        "msg_a4",
    ]
    assert (
        by["msg_a6"].parent_id == "msg_a5" and len(by["msg_a6"].messages) == 1
    )  # history ends at the boundary
    assert by["msg_a6"].messages[0]["content"].startswith("This session is being continued")
    assert by["msg_s1"].session == "session-a:agent-f00d" and by["msg_s1"].parent_id is None
    assert by["msg_b7"].session == "session-b" and by["msg_b7"].parent_id == "msg_a5"  # through the copy
    assert by["msg_a4"].timestamp - by["msg_a2"].timestamp == 425  # the idle gap, send to send


def test_messages_are_rebuilt_from_the_block_lines(project: Path) -> None:
    a2 = next(r for r in read(project).requests if r.request_id == "msg_a2")
    roles = [m["role"] for m in a2.messages]
    assert roles == ["user", "assistant", "tool"]
    assert a2.messages[1]["content"] == "Reading the parser."  # thinking dropped, the text kept
    assert a2.messages[1]["tool_calls"][0]["function"]["arguments"] == {"path": "iso.py"}
    a4 = next(r for r in read(project).requests if r.request_id == "msg_a4")
    assert "No response requested." not in json.dumps(a4.messages)  # the synthetic response is no history


def test_recorded_usage_and_its_ttl(project: Path) -> None:
    by = {r.request_id: r for r in read(project).requests}
    a5 = by["msg_a5"].recorded
    assert (a5.prompt_tokens, a5.cache_read_tokens, a5.cache_write_tokens) == (5600, 4997, 600)
    assert (a5.cache_write_5m_tokens, a5.cache_write_1h_tokens) == (0, 600)
    assert by["msg_a5"].auto_cache_ttl_s == 3600.0 and by["msg_a4"].auto_cache_ttl_s == 300.0


def test_system_and_tools_supplied_or_marked_missing(project: Path) -> None:
    bare = read(project).requests[0]
    assert bare.missing == ("system", "tools") and bare.tools is None
    tools = ({"name": "Read", "description": "Read a file", "schema": {"type": "object"}},)
    full = read(project, Supplied("You are Claude Code.", tools)).requests[0]
    assert full.missing == () and full.messages[0] == {"role": "system", "content": "You are Claude Code."}
    assert [b.section for b in full.blocks[:2]] == ["tools", "system"]
    assert [b.block for b in full.breakpoints] == [1]  # the system prompt's; the last block's is automatic


def test_malformed_lines_name_the_line_and_field(tmp_path: Path) -> None:
    project = claude_code_project(tmp_path / "p")
    path = project / "session-a.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    assert rows[2]["type"] == "user" and rows[4]["type"] == "assistant"  # after two non-message records
    rows[2]["message"]["content"] = ["text", {"type": "image", "source": {}}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(TraceError, match=r"session-a\.jsonl: line 3: message\.content\[0\]: expected dict"):
        read_claude_code([path])
    rows[2]["message"]["content"] = [{"type": "image", "source": {}}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(
        TraceError, match=r"line 3: message\.content\[0\]\.type: 'image' blocks are not supported"
    ):
        read_claude_code([path])
    rows[2]["message"]["content"] = "fine"
    del rows[4]["message"]["id"]  # the second line of the first response
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(TraceError, match=r"line 5: message\.id: expected a string"):
        read_claude_code([path])
    rows[4]["message"]["id"] = "msg_a1"
    rows[4]["message"]["usage"] = "lots"  # was an AttributeError traceback
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(TraceError, match=r"line 5: message\.usage: expected dict"):
        read_claude_code([path])


def test_claude_code_2_1_chains_run_through_attachments_progress_and_system_records(tmp_path: Path) -> None:
    folder = claude_code_21_project(tmp_path / "project")
    inputs = load_inputs([folder])
    got = {r.request_id: r for r in inputs.requests}
    assert list(got) == ["msg_c1", "msg_c2", "msg_c3", "msg_c4", "msg_s1", "msg_s2"]
    c1, c2, c3, c4 = (got[f"msg_c{i}"] for i in range(1, 5))
    assert [m["role"] for m in c1.messages] == ["user"] and c1.parent_id is None
    assert c1.timestamp == seconds(at(1.2), "t")  # sent after its last attachment was written
    assert [m["role"] for m in c2.messages] == ["user", "assistant", "tool"] and c2.parent_id == "msg_c1"
    # the second prompt's parent is the turn_duration record: the chain runs on through it
    assert [m["role"] for m in c3.messages] == ["user", "assistant", "tool", "assistant", "user"]
    assert c3.messages[-1]["content"] == "Fix it then." and c3.parent_id == "msg_c2"
    assert c4.messages[0]["content"].startswith("This session is being continued") and len(c4.messages) == 1
    assert c4.parent_id == "msg_c3"  # across the compact boundary, by its logicalParentUuid
    assert all("attachments" in r.missing for r in (c1, c2, c3, c4))
    side = [got["msg_s1"], got["msg_s2"]]
    assert {r.session for r in side} == {"session-c:agent-a1f"} and side[1].parent_id == "msg_s1"
    assert inputs.notes[0] == "skipped 1 Claude Code subagent metadata files (*.meta.json)"
    assert (
        "skipped 10 transcript records that are no messages: 5 attachment, 2 queue-operation, 1 last-prompt, "
        "1 progress, 1 system turn_duration"
    ) in inputs.notes[1]
    assert any("marked missing attachments" in note for note in inputs.notes)


def test_a_response_whose_history_is_in_no_file_given_is_skipped_and_counted(tmp_path: Path) -> None:
    folder = claude_code_21_project(tmp_path / "project")
    lines = (folder / "session-c.jsonl").read_text().splitlines()
    fragment = tmp_path / "fragment.jsonl"  # from the first response on: its prompt is not in the file
    fragment.write_text("\n".join(lines[5:]) + "\n")
    got = read_claude_code([fragment])
    assert [r.request_id for r in got.requests] == ["msg_c2", "msg_c3", "msg_c4"]
    assert "skipped 1 responses whose chain holds no message" in "\n".join(got.notes)
    assert got.requests[0].parent_id == "msg_c1" and got.requests[0].messages[0]["role"] == "assistant"


def test_parallel_tool_results_are_one_user_turn_in_the_order_written(tmp_path: Path) -> None:
    inputs = load_inputs([claude_code_parallel_calls(tmp_path / "project")])
    p2, p3 = inputs.requests[1:]
    assert [m["role"] for m in p2.messages] == ["user", "assistant", "tool", "tool", "tool"]
    assert [m["tool_call_id"] for m in p2.messages[2:]] == ["t3", "t2", "t1"]
    assert [c["id"] for c in p2.messages[1]["tool_calls"]] == ["t1", "t2", "t3"]
    assert p2.unanswered == () and p3.messages[-1]["tool_call_id"] == "t5"
    assert p3.unanswered == ("t4",)  # its result was never written: reported, by id
    assert "request 3 (session-p) sends tool calls without their results: t4" in inputs.notes
