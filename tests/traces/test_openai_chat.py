"""OpenAI Chat Completions bodies (engine.traces.openai_chat), today's trace format among them: developer
role, text parts, string tool arguments, tool names; bad traces refused by request."""

from __future__ import annotations

import json

import pytest

from engine.errors import TraceError
from engine.traces.load import load_trace
from engine.traces.openai_chat import parse_chat_completions
from tests.traces.billing_trace import trace_turns
from tests.traces.conversation import chat


def test_chat_form_details() -> None:
    msgs = parse_chat_completions(chat()).messages
    assert msgs[0] == {"role": "system", "content": "You are a billing assistant."}  # developer -> system
    assert msgs[1]["content"] == "What do I owe?\nQuickly."  # text parts joined
    assert msgs[2]["tool_calls"][0]["function"]["arguments"] == {
        "invoice": "INV-7"
    }  # string arguments parsed
    assert msgs[3]["name"] == "lookup"


def test_todays_format_bare_message_lists_and_bodies(tmp_path) -> None:
    path = tmp_path / "t.json"
    turns = trace_turns()
    path.write_text(json.dumps([turns[1]["messages"], turns[2]]))
    bare, body = load_trace(path)
    assert bare.messages[2]["tool_calls"][0]["function"]["arguments"] == {"invoice": "INV-7"}
    assert bare.tools is None and body.tools == turns[2]["tools"] and bare.session == str(path)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[]", "non-empty JSON list"),
        ("[{", "not valid JSON"),
        ('[[{"role": "wizard", "content": "x"}]]', r"request 1: messages\[0\]\.role"),
        (
            '[{"messages": [{"role": "user", "content": "x"}], "tools": "lookup"}]',
            r"request 1: tools",
        ),
    ],
)
def test_bad_traces_are_refused(tmp_path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(TraceError, match=message):
        load_trace(path)


def test_multi_part_text_content_is_replayed_as_text(tmp_path) -> None:
    path = tmp_path / "t.json"
    parts = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    path.write_text(json.dumps([[{"role": "user", "content": parts}]]))
    assert load_trace(path)[0].messages == [{"role": "user", "content": "a\nb"}]
