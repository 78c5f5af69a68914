"""`POST /v1/responses` on real servers: the `openai` SDK's Responses client, whole and streamed, a repeated
request served from the cache, previous_response_id, Codex 0.171's own streamed request (the fixture, hosted
tools and all) and refusals in OpenAI's error shape."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import httpx
import openai
import pytest

import engine
from engine.serve.app import build_state
from tests.serve.clients import MODEL, WEATHER, openai_client
from tests.serve.conftest import Server, http
from tests.serve.in_process import serving

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "agents"
SHORT = {"max_output_tokens": 8, "temperature": 0}
TOOLS = [WEATHER | {"type": "function"}]


def sse_events(text: str) -> list[tuple[str, dict]]:
    """(event name, data) of each SSE event; comments (keep-alives) skipped."""
    out = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if not line.startswith(":"))
        if lines:
            out.append((lines["event"], json.loads(lines["data"])))
    return out


def test_a_repeated_request_is_served_from_the_cache(smollm2_server: Server) -> None:
    client = openai_client(smollm2_server)
    ask = {"model": MODEL, "instructions": "Answer in one word.", "input": "Name a colour."} | SHORT
    first = client.responses.create(**ask)
    second = client.responses.create(**ask)
    assert first.status in ("completed", "incomplete") and first.output[0].type == "message"
    assert first.output_text == second.output_text  # greedy
    assert first.usage.input_tokens == second.usage.input_tokens > 16
    assert second.usage.input_tokens_details.cached_tokens > 0
    report = second.model_extra["kvtestbed"]
    assert report["cached_tokens"] == second.usage.input_tokens_details.cached_tokens


def test_a_stream_and_previous_response_id(smollm2_server: Server) -> None:
    client = openai_client(smollm2_server)
    with client.responses.stream(model=MODEL, input="Say hello.", tools=TOOLS, **SHORT) as s:
        kinds = [event.type for event in s]
        first = s.get_final_response()
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] in ("response.completed", "response.incomplete")
    assert first.model_extra["kvtestbed"]["tool_calls"]["format"] == "generic"
    follow = client.responses.create(  # tools are not carried over: each request sends its own
        model=MODEL, input="Again.", previous_response_id=first.id, tools=TOOLS, **SHORT
    )
    report = follow.model_extra["kvtestbed"]
    assert report["previous_response_id"] == {"id": first.id, "items": 1 + len(first.output)}
    assert follow.previous_response_id == first.id
    assert follow.usage.input_tokens_details.cached_tokens > 0  # the first prompt (+ reply) is its prefix
    with pytest.raises(openai.NotFoundError) as e:
        client.responses.create(model=MODEL, input="x", previous_response_id="resp_unknown")
    assert e.value.body["param"] == "previous_response_id"


def test_a_continuation_that_drops_the_instructions_names_the_system_change(smollm2_server: Server) -> None:
    """instructions on the first call only: the continuation's prompt has the template's default system
    prompt instead (OpenAI carries no instructions over either), and its report compares it with the
    response it continues, by that response's session."""
    client = openai_client(smollm2_server)
    first = client.responses.create(model=MODEL, instructions="Answer in French.", input="Say hi.", **SHORT)
    follow = client.responses.create(model=MODEL, input="Again.", previous_response_id=first.id, **SHORT)
    before, report = first.model_extra["kvtestbed"], follow.model_extra["kvtestbed"]
    assert report["session_source"] == "previous_response_id" and report["session_id"] == before["session_id"]
    assert report["previous_request_id"] == first.id and report["miss_reason"] == "system_changed"


def test_codex_request_is_answered_as_a_stream(qwen_server: Server) -> None:
    """Codex 0.171's own request (tests/fixtures/agents), served under a name the server serves and with a
    short reply: hosted tools listed as not offered, the stream well formed, the usage on its last event."""
    data = json.loads((FIXTURES / "codex-tool-result.json").read_text())
    headers = {k: v for k, v in data["headers"].items() if k not in ("authorization", "accept-encoding")}
    body = data["body"] | {"model": "tiny-qwen", "max_output_tokens": 4}
    reply = http("POST", f"{qwen_server.url}/v1/responses", body, headers | {"x-api-key": qwen_server.key})
    assert reply.status == 200 and reply.headers["content-type"].startswith("text/event-stream")
    events = sse_events(reply.text)
    assert [n for n, _ in events[:2]] == ["response.created", "response.in_progress"]
    name, last = events[-1]
    assert name in ("response.completed", "response.incomplete")
    report = last["response"]["kvtestbed"]
    assert [t["type"] for t in report["tools_not_offered"]] == ["namespace", "web_search"]
    assert last["response"]["usage"]["input_tokens"] > 4000


def test_refusals_name_the_field(smollm2_server: Server) -> None:
    url = f"{smollm2_server.url}/v1/responses"
    reply = http("POST", url, {"model": MODEL, "input": "hi", "text": {"format": {"type": "json_object"}}})
    assert reply.status == 400 and reply.json()["error"]["param"] == "text.format.type"
    reply = http("POST", url, {"model": MODEL, "input": [{"type": "item_reference", "id": "x"}]})
    assert reply.status == 400 and reply.json()["error"]["param"] == "input[0].type"


def test_no_max_output_tokens_runs_to_the_context_end_under_the_reported_cap(
    tiny_dir: Callable[..., Path],
) -> None:
    """A Responses request without max_output_tokens is not cut at --default-max-tokens (OpenAI has no
    default) but the server's cap still applies, and says so; a Chat Completions request without max_tokens
    gets the default, reported too."""
    model = engine.load(str(tiny_dir("qwen2", tokenizer=True)), device="cpu", cache_tokens=2048)
    with serving(build_state(model, ["tiny"], default_max_tokens=2, max_tokens_cap=6)) as server:
        ask = {"model": "tiny", "input": "Tell me about lighthouses.", "temperature": 0}
        reply = httpx.post(f"{server.url}/v1/responses", json=ask, timeout=120).json()
        assert reply["kvtestbed"]["max_tokens"] == {"asked": None, "granted": 6, "by": "--max-tokens-cap"}
        chat = {"model": "tiny", "messages": [{"role": "user", "content": "Hi."}], "temperature": 0}
        reply = httpx.post(f"{server.url}/v1/chat/completions", json=chat, timeout=120).json()
        assert reply["kvtestbed"]["max_tokens"] == {"asked": None, "granted": 2, "by": "--default-max-tokens"}
