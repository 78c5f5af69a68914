"""Today's trace format (engine.traces.openai_chat): requests read, tool arguments parsed, bad traces
refused."""

from __future__ import annotations

import json

import pytest

from engine.errors import TraceError
from engine.traces.openai_chat import read_trace
from tests.traces.billing_trace import trace_turns


def test_openai_string_arguments_are_parsed(tmp_path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps([trace_turns()[1]["messages"]]))
    call = read_trace(path)[0].messages[2]["tool_calls"][0]["function"]
    assert call["arguments"] == {"invoice": "INV-7"}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[]", "non-empty JSON list"),
        ("{", "not valid JSON"),
        ('[[{"role": "wizard", "content": "x"}]]', "request 1"),
    ],
)
def test_bad_traces_are_refused(tmp_path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(TraceError, match=message):
        read_trace(path)
