"""Tool calls a rebuilt request leaves without results: found per request, by id, in every format."""

from __future__ import annotations

import json
from pathlib import Path

from engine.traces.inputs import load_inputs
from engine.traces.tool_calls import unanswered_calls


def call(i: str) -> dict:
    return {"id": i, "type": "function", "function": {"name": "bash", "arguments": "{}"}}


def test_a_call_without_its_result_before_the_conversation_goes_on() -> None:
    asked = {"role": "assistant", "content": "", "tool_calls": [call("a"), call("b")]}
    ok = [{"role": "user", "content": "go"}, asked, {"role": "tool", "tool_call_id": "b", "content": "B"}]
    ok.append({"role": "tool", "tool_call_id": "a", "content": "A"})
    assert unanswered_calls(ok) == ()
    assert unanswered_calls([*ok[:3], {"role": "user", "content": "and?"}]) == ("a",)
    assert unanswered_calls(ok[:3]) == ("a",)  # the request ends after an incomplete result turn
    assert unanswered_calls(ok[:2]) == ()  # its last message: the calls are still open


def test_chat_bodies_with_a_missing_result_are_noted_by_request(tmp_path: Path) -> None:
    first = [{"role": "user", "content": "go"}]
    second = [*first, {"role": "assistant", "content": "", "tool_calls": [call("x1"), call("x2")]}]
    second.append({"role": "tool", "tool_call_id": "x2", "content": "done"})
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps({"messages": m}) + "\n" for m in (first, second)))
    inputs = load_inputs([path])
    assert [r.unanswered for r in inputs.requests] == [(), ("x1",)]
    assert inputs.notes == [f"request 2 ({path}) sends tool calls without their results: x1"]
