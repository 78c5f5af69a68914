"""Every trace reader ends, with bounded memory, on any input, and says what it refused in one line: chains
that loop, lengths and counts past any request, files that are not regular files (a FIFO, a device, a
symlink loop), JSON nested past the bound or holding an integer of thousands of digits, times outside the
years 1 to 9999. Each input runs in a forked child with a deadline and a memory limit, so that a reader
that loops or grows fails the test instead of the machine."""

from __future__ import annotations

import json
import multiprocessing
import os
import resource
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine.traces.claude_code import read_claude_code
from engine.traces.fields import MAX_DEPTH, MAX_TOKENS
from engine.traces.inputs import load_inputs
from engine.traces.mooncake import MAX_REQUEST_BLOCKS, read_hash_trace
from engine.traces.supplied import load_supplied

DEADLINE_S = 60.0  # generous on a loaded machine; every input here is refused in well under a second
HEADROOM = 1 << 30  # bytes the child may grow by


def outcome(fn: Callable[..., Any], *args: Any) -> str:
    """`fn(*args)` in a forked child: "ok", or the type and message of what it raised. The child gets
    `HEADROOM` bytes of address space over what it inherits; one still running after the deadline fails."""
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)

    def child() -> None:
        if sys.platform == "linux":
            with open("/proc/self/statm") as f:
                size = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
            resource.setrlimit(resource.RLIMIT_AS, (size + HEADROOM, size + HEADROOM))
        try:
            fn(*args)
            send.send("ok")
        except BaseException as e:  # noqa: BLE001 - whatever it is, the parent says so
            send.send(f"{type(e).__name__}: {e}")

    process = ctx.Process(target=child)
    process.start()
    process.join(DEADLINE_S)
    if process.is_alive():
        process.kill()
        process.join()
        pytest.fail(f"{getattr(fn, '__name__', fn)}{args} still running after {DEADLINE_S:.0f} s")
    return receive.recv() if receive.poll() else f"exit {process.exitcode}"


def refused(fn: Callable[..., Any], *args: Any) -> str:
    """The one line a refusal says (a TraceError, never anything else)."""
    said = outcome(fn, *args)
    kind, _, message = said.partition(": ")
    assert kind in ("TraceError", "FieldError"), said
    assert "\n" not in message and len(message) < 400, said
    return message


def inputs(*paths: Path | str, **kw: Any) -> None:
    load_inputs([str(p) for p in paths], **kw)


def lines(path: Path, *records: Any) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def user(uuid: str, parent: str | None, **fields: Any) -> dict[str, Any]:
    return {
        "type": "user",
        "uuid": uuid,
        "parentUuid": parent,
        "sessionId": "s",
        "timestamp": "2026-12-01T10:00:00Z",
        "message": {"role": "user", "content": "hi"},
    } | fields


def assistant(uuid: str, parent: str) -> dict[str, Any]:
    message = {
        "id": f"msg_{uuid}",
        "role": "assistant",
        "model": "claude-x",
        "content": [{"type": "text", "text": "yes"}],
        "usage": {"input_tokens": 3, "output_tokens": 1},
    }
    return user(uuid, parent, type="assistant", requestId=f"req_{uuid}", message=message)


def test_a_parent_chain_that_loops_is_refused(tmp_path: Path) -> None:
    own = lines(tmp_path / "own.jsonl", user("u1", "u1"), assistant("a1", "u1"))
    assert refused(read_claude_code, [own]) == f"{own}: line 1: parentUuid: the chain loops back to u1"
    pair = lines(tmp_path / "pair.jsonl", user("u1", "u2"), user("u2", "u1"), assistant("a1", "u2"))
    assert "parentUuid: the chain loops back to u2" in refused(read_claude_code, [pair])
    boundary = {"type": "system", "subtype": "compact_boundary", "uuid": "b1", "parentUuid": None}
    logical = lines(
        tmp_path / "logical.jsonl",
        boundary | {"logicalParentUuid": "u2", "sessionId": "s"},
        user("u2", "b1"),
        assistant("a2", "u2"),
    )
    assert "the chain loops back to" in refused(read_claude_code, [logical])


def test_lengths_and_counts_past_any_request_are_refused(tmp_path: Path) -> None:
    huge = lines(
        tmp_path / "huge.jsonl",
        {"timestamp": 0, "input_length": 10, "output_length": 10**15, "hash_ids": [1]},
    )
    assert refused(read_hash_trace, huge).endswith(
        f"line 1: output_length: expected a token count (0 to {MAX_TOKENS:.0e}), got 1000000000000000"
    )
    many = lines(
        tmp_path / "many.jsonl",
        {"timestamp": 0, "input_length": 1, "output_length": MAX_REQUEST_BLOCKS, "hash_ids": [1]},
    )
    assert f"a request holds at most {MAX_REQUEST_BLOCKS:,} here" in refused(read_hash_trace, many, 1)
    assert outcome(read_hash_trace, many) == "ok"  # the same request at 512 tokens per block
    usage = {"input_tokens": 10**40, "output_tokens": 1}
    record = assistant("a1", "u1")
    record["message"]["usage"] = usage
    counts = lines(tmp_path / "counts.jsonl", user("u1", None), record)
    assert "message.usage.input_tokens: expected a token count" in refused(read_claude_code, [counts])


def test_only_regular_files_are_read(tmp_path: Path) -> None:
    fifo = tmp_path / "trace.jsonl"
    os.mkfifo(fifo)
    assert refused(inputs, fifo) == f"trace file {fifo} is a FIFO: give a regular file"
    assert refused(inputs, "/dev/zero") == "trace file /dev/zero is a character device: give a regular file"
    loop = tmp_path / "loop.jsonl"
    loop.symlink_to(tmp_path / "back.jsonl")
    (tmp_path / "back.jsonl").symlink_to(loop)
    assert refused(inputs, loop).startswith(f"trace file {loop} cannot be read: ")
    assert refused(load_supplied, Path("/dev/zero"), None).startswith(
        "--system-file /dev/zero is a character"
    )
    assert refused(load_supplied, None, fifo).startswith(f"--tools-file {fifo} is a FIFO")
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "trace.jsonl").symlink_to(loop)  # a folder's symlink loops are not trace files
    (folder / "up").symlink_to(folder)  # nor is a folder that contains itself walked forever
    assert "holds no .jsonl" in refused(inputs, folder)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[" * 100_000, "nested more than 256 levels deep"),
        ('{"messages": ' + "[" * 100_000, "line 1: nested more than 256 levels deep"),
        ('{"body": {"x": ' + "[" * 300 + "]" * 300 + "}}", "nested more than 256 levels deep"),
        ('{"timestamp": ' + "9" * 5000 + "}", "line 1: holds an integer of more than 4,300 digits"),
        ('[{"messages": [{"role": "user", "content": "x"}], "n": ' + "7" * 5000 + "}]", "4,300 digits"),
        (
            '{"timestamp": 1e308, "body": {"messages": [{"role": "user", "content": "hi"}]}}',
            "request 1: timestamp: 1e+308 is outside the years 1 to 9999",
        ),
        (
            '{"timestamp": "' + "9" * 5000 + '", "body": {"messages": [{"role": "user", "content": "x"}]}}',
            "request 1: timestamp: expected seconds or an ISO 8601 time",
        ),
    ],
)
def test_json_past_the_bounds_is_one_line(tmp_path: Path, text: str, message: str) -> None:
    assert MAX_DEPTH == 256
    path = tmp_path / "trace.jsonl"
    path.write_text(text + "\n")
    said = refused(inputs, path)
    assert said.startswith(str(path)) and message in said, said


def test_every_file_reader_takes_the_bounds(tmp_path: Path) -> None:
    deep = "[" * 300 + "]" * 300
    claude = lines(tmp_path / "claude.jsonl", '{"type": "user", "parentUuid": null, "x": ' + deep + "}")
    said = refused(inputs, claude)
    assert said.startswith(f"{claude}: line 1: x[0][0]") and said.endswith(
        "...: nested more than 256 levels deep"
    )
    capture = {
        "request": {"method": "POST", "url": "https://api.anthropic.com/v1/messages", "body": "[" * 5000},
        "response": {"status_code": 200, "body": "{}"},
    }
    said = refused(inputs, lines(tmp_path / "capture.jsonl", capture))
    assert said.endswith("line 1: request.body: nested more than 256 levels deep"), said
    attribute = {"key": "gen_ai.input.messages", "value": {"stringValue": '{"n": ' + "1" * 5000 + "}"}}
    spans = {"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "chat", "attributes": [attribute]}]}]}]}
    said = refused(inputs, lines(tmp_path / "spans.jsonl", spans))
    assert "attributes[gen_ai.input.messages]: holds an integer of more than 4,300 digits" in said
    codex = [
        {"timestamp": "2026-12-01T10:00:00Z", "type": "session_meta", "payload": {"id": "c"}},
        {"timestamp": 1e300 * 1e10, "type": "turn_context", "payload": {"model": "m"}},
    ]
    said = refused(inputs, lines(tmp_path / "rollout.jsonl", *codex))
    assert "line 2: timestamp: expected a finite number of seconds" in said
