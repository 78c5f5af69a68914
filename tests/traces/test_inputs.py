"""Every trace a command is given: folders expanded, formats detected per file (or forced), Claude Code
transcripts read together, hash-id traces apart, supplied prompt parts only where a trace lacks them; a file
given twice refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.errors import TraceError
from engine.traces.inputs import MAX_SESSION_CHARS, load_inputs
from engine.traces.shipped import EXAMPLES
from engine.traces.supplied import Supplied, load_supplied
from tests.traces.conversation import chat
from tests.traces.write_claude_code import claude_code_project
from tests.traces.write_codex import codex_rollout


def test_a_folder_of_several_formats(tmp_path: Path) -> None:
    claude_code_project(tmp_path / "traces" / "claude")
    codex_rollout(tmp_path / "traces" / "codex" / "rollout-1.jsonl")
    got = load_inputs([tmp_path / "traces"])
    assert got.formats == ["claude-code", "codex"] and len(got.requests) == 7 + 4
    assert [r.request_id for r in got.requests].count("msg_a5") == 1  # the resumed copy is no second request


def test_hash_traces_are_kept_apart() -> None:
    got = load_inputs([EXAMPLES["mooncake"], EXAMPLES["openai-chat"]])
    assert len(got.hash_traces) == 1 and len(got.requests) == 6


def test_a_format_can_be_forced_on_a_file(tmp_path: Path) -> None:
    path = codex_rollout(tmp_path / "r.jsonl")
    assert len(load_inputs([path], "codex").requests) == 4
    with pytest.raises(TraceError, match="request 1"):
        load_inputs([path], "anthropic")


def test_supplied_parts_only_where_the_trace_lacks_them(tmp_path: Path) -> None:
    system, tools = tmp_path / "system.txt", tmp_path / "tools.json"
    system.write_text("You are Claude Code.")
    tools.write_text(
        json.dumps([{"type": "function", "function": {"name": "Read", "parameters": {"type": "object"}}}])
    )
    supplied = load_supplied(system, tools)
    assert supplied.tools[0]["name"] == "Read" and supplied.system == "You are Claude Code."
    codex = load_inputs([codex_rollout(tmp_path / "r.jsonl")], supplied=supplied)
    assert codex.requests[0].missing == () and codex.requests[0].tools[0]["function"]["name"] == "Read"
    with pytest.raises(TraceError, match="--system-file and --tools-file supply what"):
        load_inputs([EXAMPLES["anthropic"]], supplied=Supplied("x"))
    tools.write_text(json.dumps([{"name": "Read"}]))
    with pytest.raises(TraceError, match=r"--tools-file .*: \[0\]\.input_schema: missing"):
        load_supplied(None, tools)


def test_an_empty_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(TraceError, match="the folder holds no"):
        load_inputs([tmp_path / "empty"])


def test_two_files_of_one_name_are_two_sessions_and_one_file_twice_is_refused(tmp_path: Path) -> None:
    for day in ("day1", "day2"):
        (tmp_path / day).mkdir()
        (tmp_path / day / "trace.jsonl").write_text(json.dumps(chat()) + "\n")
    day1, day2 = str(tmp_path / "day1" / "trace.jsonl"), str(tmp_path / "day2" / "trace.jsonl")
    assert [r.session for r in load_inputs([day1, day2]).requests] == [day1, day2]
    with pytest.raises(TraceError, match=r"trace .*day1/trace.jsonl is given twice: give each file once"):
        load_inputs([day1, day1])
    other = str(tmp_path / "day2" / ".." / "day1" / "trace.jsonl")
    with pytest.raises(TraceError, match=r"given twice \(as .*day1/trace.jsonl\)"):
        load_inputs([day1, other])
    with pytest.raises(TraceError, match="example:anthropic is given twice"):
        load_inputs(["example:anthropic", "example:anthropic"])
    with pytest.raises(TraceError, match=r"trace .*day1/trace.jsonl is given twice: give each file once"):
        load_inputs([day1, str(tmp_path / "day1")])  # again, inside a folder given


def test_a_session_name_past_the_bound_is_shortened_one_name_per_session(tmp_path: Path) -> None:
    """A 20 MB session id took minutes and GBs of memory to draw in the analysis plots' labels."""
    long_a, long_b = "a" * 300_000, "a" * 299_999 + "b"
    rows = [{"session_id": s, "body": chat()} for s in (long_a, long_b, long_a, "short")]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    sessions = [r.session for r in load_inputs([path]).requests]
    assert sessions[3] == "short" and sessions[0] == sessions[2] != sessions[1]
    assert all(len(s) <= MAX_SESSION_CHARS and s.startswith("a" * 48 + "...sha256:") for s in sessions[:3])
