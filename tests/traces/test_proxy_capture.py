"""Proxy captures: claude-trace logs and HAR files; chat endpoints only, usage from JSON and event-stream
responses, other requests counted, headers never read."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from engine.errors import TraceError
from engine.traces.proxy_capture import read_claude_trace, read_har, response_usage
from tests.traces.write_captures import claude_trace_log, har_file


def test_claude_trace(tmp_path: Path) -> None:
    got = read_claude_trace(claude_trace_log(tmp_path / "log-2026-11-30.jsonl"))
    assert [r.model for r in got.requests] == [
        "claude-sonnet-4-5-20250929",
        "claude-haiku-4-5",
        *["claude-sonnet-4-5-20250929"] * 2,
    ]
    assert got.notes == [
        "skipped 2 captured requests: 1 POST /api/event_logging/batch, 1 POST /v1/messages/count_tokens"
    ]
    streamed = got.requests[2].recorded
    assert (streamed.cache_read_tokens, streamed.cache_write_tokens, streamed.output_tokens) == (
        1497,
        1500,
        44,
    )
    assert got.requests[1].recorded.cache_read_tokens is None  # the side request reported no cache counts
    assert got.requests[0].timestamp == pytest.approx(1796029201.0)  # milliseconds read as such
    assert [b.block for b in got.requests[2].breakpoints] == [1, len(got.requests[2].blocks) - 1]
    assert "sk-ant-secret" not in json.dumps([asdict(r) for r in got.requests], default=str)


def test_har(tmp_path: Path) -> None:
    got = read_har(har_file(tmp_path / "capture.har"))
    assert len(got.requests) == 3 and {r.cache_key for r in got.requests} == {"acct-7"}
    assert got.notes == ["skipped 2 captured requests: 1 GET /usage, 1 responses with status 429"]
    assert [r.recorded.cache_read_tokens for r in got.requests] == [0, 1408, None]  # JSON, a stream, base64
    assert got.requests[2].recorded.prompt_tokens == 1530
    assert "sk-secret" not in json.dumps([asdict(r) for r in got.requests], default=str)


@pytest.mark.parametrize(
    ("message", "key", "value", "error"),
    [
        (1, "role", "wizard", r"messages\[1\]\.role"),
        # a body captured as JSON text decodes to a lone surrogate only when read: refused there, named
        (0, "content", "a\ud800", r"messages\[0\]\.content: holds a lone surrogate"),
    ],
)
def test_a_bad_body_names_the_entry_and_field(
    tmp_path: Path, message: int, key: str, value: str, error: str
) -> None:
    path = har_file(tmp_path / "capture.har")
    doc = json.loads(path.read_text())
    body = json.loads(doc["log"]["entries"][1]["request"]["postData"]["text"])
    body["messages"][message][key] = value
    doc["log"]["entries"][1]["request"]["postData"]["text"] = json.dumps(body)
    path.write_text(json.dumps(doc))
    with pytest.raises(TraceError, match=r"log\.entries\[1\]: request\.postData\.text\." + error):
        read_har(path)


def test_deepseek_behind_a_router_is_known_by_its_usage() -> None:
    usage = {"prompt_tokens": 900, "prompt_cache_hit_tokens": 832, "prompt_cache_miss_tokens": 68}
    got = response_usage({"usage": usage}, "openai-chat", "openai", "deepseek/deepseek-chat")
    assert (got.provider, got.cache_read_tokens) == ("deepseek", 832)
    plain = response_usage({"usage": {"prompt_tokens": 900}}, "openai-chat", "openai", "gpt-4.1")
    assert plain.provider == "openai"
