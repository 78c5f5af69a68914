"""Codex rollouts: one request per model call (its token_count), the base instructions as the system
prompt, the Responses items as messages, a compaction replacing the history, usage as recorded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.errors import TraceError
from engine.traces.codex import read_codex
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
