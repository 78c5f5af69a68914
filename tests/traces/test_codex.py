"""Codex rollouts: one request per model call (its token_count), the base instructions as the system
prompt, the Responses items as messages, a compaction replacing the history, usage as recorded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.errors import TraceError
from engine.traces.codex import read_codex
from engine.traces.inputs import load_inputs
from tests.traces.write_codex import codex_rollout


@pytest.fixture(scope="module")
def rollout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return codex_rollout(tmp_path_factory.mktemp("codex") / "rollout-2026-11-30T09-00-00-1.jsonl")


def test_one_request_per_model_call(rollout: Path) -> None:
    got = read_codex(rollout)
    assert len(got.requests) == 4  # the repeated token_count and the one without usage are skipped
    assert any("2 token_count without new usage" in n for n in got.notes)
    first, second, third, fourth = got.requests
    assert first.messages[0]["role"] == "system" and first.messages[0]["content"].startswith("You are Codex")
    assert [m["role"] for m in second.messages] == ["system", "user", "user", "assistant", "tool"]
    assert second.messages[3]["tool_calls"][0]["function"]["arguments"] == {"command": ["cat", "iso.py"]}
    assert third.messages[-1]["role"] == "user" and third.timestamp - second.timestamp == 480
    assert [m["content"] for m in fourth.messages[1:]] == ["Summary: fixing iso.py.", "Run the tests."]
    assert [r.parent_id for r in got.requests] == [None, *(r.request_id for r in got.requests[:3])]


def test_usage_and_what_is_missing(rollout: Path) -> None:
    requests = read_codex(rollout).requests
    usage = requests[1].recorded
    assert (usage.provider, usage.model, usage.prompt_tokens, usage.cache_read_tokens) == (
        "openai",
        "gpt-5-codex",
        3300,
        1280,
    )
    assert usage.cache_write_tokens is None  # not reported, not 0
    assert all(r.missing == ("tools",) for r in requests)


def test_a_bad_count_names_the_line_and_field(tmp_path: Path) -> None:
    path = codex_rollout(tmp_path / "rollout-x.jsonl")
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    n = next(i for i, r in enumerate(rows) if r["type"] == "event_msg" and (r["payload"].get("info") or {}))
    rows[n]["payload"]["info"]["last_token_usage"]["cached_input_tokens"] = -3
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(
        TraceError,
        match=rf"line {n + 1}: payload\.info\.last_token_usage\.cached_input_tokens: expected a token count",
    ):
        read_codex(path)


def test_parallel_calls_are_one_assistant_turn_and_all_their_outputs(tmp_path: Path) -> None:
    def line(kind: str, payload: dict) -> dict:
        return {"timestamp": "2026-01-01T00:00:00Z", "type": kind, "payload": payload}

    def call(i: str) -> dict:
        return line(
            "response_item", {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": i}
        )

    def output(i: str) -> dict:
        return line("response_item", {"type": "function_call_output", "call_id": i, "output": i.upper()})

    last = {"input_tokens": 2000, "cached_input_tokens": 1024, "output_tokens": 9}
    done = line("event_msg", {"type": "token_count", "info": {"last_token_usage": last}})
    user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Look."}]}
    said = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}]}
    rows = [line("session_meta", {"id": "p", "base_instructions": "Be Codex."}), line("response_item", user)]
    rows += [call("a"), call("b"), done, output("b"), output("a"), line("response_item", said), done]
    path = tmp_path / "rollout.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    second = load_inputs([path]).requests[1]
    assert [m["role"] for m in second.messages] == ["system", "user", "assistant", "tool", "tool"]
    assert [c["id"] for c in second.messages[2]["tool_calls"]] == ["a", "b"] and second.unanswered == ()
