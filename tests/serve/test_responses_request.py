"""Responses API requests: what Codex 0.171 and the Agents SDK 0.24 send (tests/fixtures/agents) is read
whole; hosted tools are listed, not refused; previous_response_id continues a kept response; refusals name
the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.serve.errors import APIError
from engine.serve.response_store import ResponseStore
from engine.serve.responses_request import parse_responses_request

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "agents"
NAMES = ["m", "gpt-5.4", "gpt-5.6-luna"]


def fixture(name: str) -> tuple[dict[str, Any], dict[str, str]]:
    data = json.loads((FIXTURES / f"{name}.json").read_text())
    return data["body"], data["headers"]


def parse(body: dict[str, Any], kept: ResponseStore | None = None, headers: dict[str, str] | None = None):
    return parse_responses_request(body, headers or {}, NAMES, kept or ResponseStore())


def refused(changes: dict[str, Any]) -> APIError:
    with pytest.raises(APIError) as e:
        parse({"model": "m", "input": "hi"} | changes)
    return e.value


def test_codex_request_is_read_whole() -> None:
    body, headers = fixture("codex-tool-result")
    req = parse(body, headers=headers)
    assert req.stream and req.clamp_max_tokens and req.api == "openai-responses"
    assert [m["role"] for m in req.messages] == ["system", "system", "user", "user", "assistant", "tool"]
    assert len(req.tools) == 7 and req.parse_tools and req.request_id.startswith("resp_")
    assert req.notes["tools_not_offered"] == [
        {"index": 4, "type": "namespace", "name": "multi_agent_v1"},
        {"index": 8, "type": "web_search"},
    ]
    assert set(req.notes["not_applied"]) == {"reasoning.summary", "include"}


def test_agents_sdk_default_model_request_is_read() -> None:
    body, _ = fixture("agents-responses-tool-result")
    req = parse(body)
    assert not req.stream and req.model == "gpt-5.6-luna"
    assert [m["role"] for m in req.messages] == ["system", "user", "assistant", "tool"]
    assert set(req.notes["not_applied"]) == {"reasoning.effort", "text.verbosity"}


def test_previous_response_id_continues_a_kept_response() -> None:
    kept = ResponseStore(capacity=2)
    first = [{"role": "user", "content": "hi"}, {"type": "message", "role": "assistant", "content": "hello"}]
    kept.keep("resp_1", "anonymous", first)
    req = parse({"model": "m", "input": "again", "previous_response_id": "resp_1"}, kept)
    assert [(m["role"], m["content"]) for m in req.messages] == [
        ("user", "hi"),
        ("assistant", "hello"),
        ("user", "again"),
    ]
    assert "previous_response_id" not in req.body and len(req.body["input"]) == 3  # rendered whole
    assert req.notes["previous_response_id"] == {"id": "resp_1", "items": 2}
    kept.keep("resp_2", "anonymous", [])
    kept.keep("resp_3", "anonymous", [])  # over capacity: resp_1 is forgotten
    with pytest.raises(APIError) as e:
        parse({"model": "m", "input": "x", "previous_response_id": "resp_1"}, kept)
    assert e.value.param == "previous_response_id" and e.value.code == "previous_response_not_found"


@pytest.mark.parametrize(
    ("changes", "param"),
    [
        ({"model": "other"}, "model"),
        ({"input": None}, "input"),
        ({"input": [{"type": "message", "role": "tool", "content": "x"}]}, "input[0].role"),
        ({"input": [{"role": "user", "content": [{"type": "input_image"}]}]}, "input[0].content[0].type"),
        ({"tool_choice": "required"}, "tool_choice"),
        ({"text": {"format": {"type": "json_schema"}}}, "text.format.type"),
        ({"truncation": "auto"}, "truncation"),
        ({"parallel_tool_calls": False}, "parallel_tool_calls"),
        ({"max_output_tokens": 0}, "max_output_tokens"),
        ({"temperature": 3}, "temperature"),
        ({"include": "x"}, "include"),
        ({"store": "yes"}, "store"),
        ({"conversation": "conv_1"}, "conversation"),
        ({"frequency_penalty": 1}, "frequency_penalty"),
    ],
)
def test_refused_by_name(changes: dict[str, Any], param: str) -> None:
    e = refused(changes)
    assert e.param == param and e.status in (400, 404), e.message
    assert e.openai_body()["error"]["param"] == param
