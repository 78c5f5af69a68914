"""The server's record of a `previous_response_id` chain read back whole: each line holds only its new input
and a reference (`continues`: the id, the items the server put first and their digest); the reader rebuilds
the conversation the server rendered from the earlier lines' input and output, drops the items no prompt
renders as the server's store does, and refuses in one line a chain that points to a response the file does
not hold, a rebuilt conversation whose digest differs, and a chain that loops. Records without the
reference (first turns, other formats, older records holding the whole input) read as before."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.errors import TraceError
from engine.traces.load import load_trace
from engine.traces.response_chain import DIGEST, ChainRebuilder, digest
from engine.traces.responses import rendered_items

REASONING = {"type": "reasoning", DIGEST: "sha256:00", "bytes": 50_000}  # as the record keeps one


def reply(n: int) -> dict[str, Any]:
    text = {"type": "output_text", "text": f"answer {n}", "annotations": [], "logprobs": []}
    return {
        "type": "message",
        "id": f"msg_{n}",
        "status": "completed",
        "role": "assistant",
        "content": [text],
    }


def line(n: int, new: list[Any], history: list[Any] | None, digested: bool = True) -> dict[str, Any]:
    """Turn n of a chain as the server records it; `history`: what the server put before `new`."""
    body = {"model": "m", "instructions": "Be brief.", "input": new}
    entry = {
        "timestamp": 100.0 + n,
        "session_id": "s",
        "format": "openai-responses",
        "body": body,
        "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 2},
        "kvtestbed": {"request_id": f"resp_{n}", "session_id": "s"},
        "output": [reply(n)],
    }
    if history is not None:
        body["previous_response_id"] = f"resp_{n - 1}"
        entry["continues"] = {"id": f"resp_{n - 1}", "items": len(history)} | (
            digest(history) if digested else {}
        )
    return entry


def chain(turns: int, digested: bool = True) -> list[dict[str, Any]]:
    """A chain of `turns` responses, each turn sending a reasoning item and a user message."""
    lines, kept = [], None
    for n in range(turns):
        new = [REASONING, {"type": "message", "role": "user", "content": f"question {n}"}]
        lines.append(line(n, new, kept, digested))
        kept = rendered_items((kept or []) + new + [reply(n)])  # what the server's store keeps
    return lines


def write(path: Path, entries: list[Any]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    return path


def test_a_chain_is_rebuilt_into_the_conversation_the_server_rendered(tmp_path: Path) -> None:
    requests = load_trace(write(tmp_path / "rec.jsonl", chain(4)))
    assert [len(r.messages) for r in requests] == [2, 4, 6, 8]  # instructions, then two messages a turn
    last = requests[-1].messages
    assert [m["role"] for m in last] == ["system"] + ["user", "assistant"] * 3 + ["user"]
    assert [m["content"] for m in last[1:]] == [
        "question 0",
        "answer 0",
        "question 1",
        "answer 1",
        "question 2",
        "answer 2",
        "question 3",
    ]


def test_old_records_holding_the_whole_input_read_as_before(tmp_path: Path) -> None:
    whole = chain(1)[0]
    whole["body"]["input"] = [
        {"role": "user", "content": "q"},
        reply(0),
        {"role": "user", "content": "again"},
    ]
    assert len(load_trace(write(tmp_path / "old.jsonl", [whole]))[0].messages) == 4


def test_a_response_not_in_the_file_is_refused_naming_it(tmp_path: Path) -> None:
    lines = chain(3)[1:]  # the chain's first response is not in the file
    with pytest.raises(TraceError) as e:
        load_trace(write(tmp_path / "cut.jsonl", lines))
    message = str(e.value)
    assert "\n" not in message and "request 1" in message and "'resp_0'" in message
    assert "previous_response_id" in message


def test_a_rebuilt_conversation_that_differs_is_refused(tmp_path: Path) -> None:
    lines = chain(3)
    lines[0]["output"][0]["content"][0]["text"] = "edited"  # not what the server answered and kept
    with pytest.raises(
        TraceError, match=r"request 2: continues: the conversation rebuilt for response 'resp_0'"
    ):
        load_trace(write(tmp_path / "edited.jsonl", lines))


def test_a_chain_that_loops_is_refused(tmp_path: Path) -> None:
    lines = chain(2)
    lines[0] |= {"continues": {"id": "resp_1", "items": 0}}
    with pytest.raises(TraceError, match="loops back"):
        load_trace(write(tmp_path / "loop.jsonl", lines))


def test_a_chain_deeper_than_the_recursion_limit_is_rebuilt() -> None:
    lines = chain(1_200, digested=False)  # 1,200 conversations hashed would be slow
    last = ChainRebuilder(lines).whole(lines[-1])
    assert len(last["body"]["input"]) == 2 * 1_199 + 2 and "previous_response_id" not in last["body"]
