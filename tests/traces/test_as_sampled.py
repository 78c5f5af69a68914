"""The server's record of replies rendered as sampled, read back (engine/traces/as_sampled.py): a later line's
message is rendered from an earlier line's reply as the server did, its own reply's ids kept; a line without
the fields (an older record) reads as before; a wrong field is refused naming the line and the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.errors import TraceError
from engine.prompts.sampled import CALLS
from engine.traces.load import load_trace

RAW = '<tool_call>{"name": "f", "arguments": {}}</tool_call>'


def line(n: int, messages: list[Any], **fields: Any) -> str:
    body = {"model": "m", "messages": messages}
    entry = {"timestamp": float(n), "session_id": "s", "format": "openai-chat", "body": body}
    return json.dumps(entry | {"kvtestbed": {"request_id": f"r{n}"}} | fields)


def test_a_message_is_rendered_from_the_reply_the_record_names(tmp_path: Path) -> None:
    ask = [{"role": "user", "content": "Call f."}]
    call = {"id": "call_x0", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    later = [*ask, {"role": "assistant", "content": "Sure.", "tool_calls": [call]}]
    later += [{"role": "tool", "tool_call_id": "call_x0", "content": "done"}]
    sampled = {"ids": [5, 6, 7], "text": RAW, "calls": [{"id": "call_x0", "raw": "\n" + RAW}]}
    path = tmp_path / "record.jsonl"
    uses = [{"message": 1, "reply": "r1", "as": CALLS}]
    path.write_text(line(1, ask, sampled=sampled) + "\n" + line(2, later, as_sampled=uses) + "\n")
    first, second = load_trace(path)
    assert first.sampled is not None and first.sampled.ids == (5, 6, 7) and first.messages == ask
    assert second.messages[1] == {"role": "assistant", "content": "Sure.\n" + RAW}  # its text, the raw call
    assert second.sampled is None and [u.reply.request_id for u in second.as_sampled] == ["r1"]
    path.write_text(line(1, ask) + "\n" + line(2, later) + "\n")  # an older record: the template renders
    assert load_trace(path)[1].messages[1]["tool_calls"][0]["id"] == "call_x0"


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"sampled": {"ids": ["a"], "text": ""}}, "sampled.ids"),
        ({"sampled": {"ids": [1], "text": 3}}, "sampled.text"),
        ({"as_sampled": [{"message": 0, "reply": "r1", "as": "other"}]}, r"as_sampled\[0\]"),
    ],
)
def test_a_wrong_field_is_refused_by_name(tmp_path: Path, fields: dict[str, Any], named: str) -> None:
    path = tmp_path / "record.jsonl"
    path.write_text(line(1, [{"role": "user", "content": "hi"}], **fields) + "\n")
    with pytest.raises(TraceError, match=f"request 1: {named}"):
        load_trace(path)
