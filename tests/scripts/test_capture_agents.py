"""scripts/capture_server.py and capture_agents.py without npm: the capture server's answers parsed by the real
SDKs (so a client proceeds to its next turn), the scrubbing and naming of fixtures, and the committed fixtures'
consistency."""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
from capture_agents import Scrubber, fixtures, label  # noqa: E402
from capture_server import make_app  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "agents"
WEATHER = {
    "name": "lookup",  # not a known tool: its required fields get fillers
    "description": "Weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


@pytest.fixture(scope="module")
def capture(tmp_path_factory) -> Iterator[tuple[str, Path]]:
    log = tmp_path_factory.mktemp("capture") / "log.jsonl"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(make_app(log), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}", log
    server.should_exit = True
    thread.join(timeout=10)


def records(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_anthropic_stream_calls_a_tool_then_answers_text(capture) -> None:
    anthropic = pytest.importorskip("anthropic")
    url, log = capture
    client = anthropic.Anthropic(base_url=url, api_key="secret-key", max_retries=0)
    tools = [{"name": "lookup", "input_schema": WEATHER["parameters"]}]
    messages = [{"role": "user", "content": "Weather in Paris?"}]
    with client.messages.stream(model="m", max_tokens=64, messages=messages, tools=tools) as stream:
        first = stream.get_final_message()
    assert first.stop_reason == "tool_use" and first.content[0].input == {"city": "example"}
    messages += [
        {"role": "assistant", "content": [block.model_dump() for block in first.content]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": first.content[0].id, "content": "Sunny"}],
        },
    ]
    second = client.messages.create(model="m", max_tokens=64, messages=messages, tools=tools)
    assert second.stop_reason == "end_turn" and second.content[0].text == "Done."
    logged = records(log)[-2:]
    assert [r["answered"]["kind"] for r in logged] == ["tool_call:lookup", "text"]
    assert (
        logged[0]["headers"]["authorization"] == "<redacted>"
        and logged[0]["body"]["messages"] == messages[:1]
    )


def test_responses_stream_is_parsed_by_the_openai_sdk(capture) -> None:
    openai = pytest.importorskip("openai")
    url, log = capture
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="secret-key", max_retries=0)
    tools = [{"type": "function", **WEATHER}, {"type": "web_search"}]
    with client.responses.stream(model="m", input="Weather in Paris?", tools=tools) as stream:
        first = stream.get_final_response()
    call = first.output[0]
    assert call.type == "function_call" and json.loads(call.arguments) == {"city": "example"}
    follow = [{"type": "function_call_output", "call_id": call.call_id, "output": "Sunny"}]
    with client.responses.stream(model="m", input=follow, tools=tools) as stream:
        second = stream.get_final_response()
    assert second.output_text == "Done." and second.usage.input_tokens_details.cached_tokens == 0
    assert records(log)[-1]["headers"]["authorization"] == "<redacted>"


def test_chat_completions_stream_and_plain(capture) -> None:
    openai = pytest.importorskip("openai")
    url, _ = capture
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0)
    tools = [{"type": "function", "function": WEATHER}]
    messages = [{"role": "user", "content": "Weather in Paris?"}]
    chunks = list(
        client.chat.completions.create(
            model="m", messages=messages, tools=tools, stream=True, stream_options={"include_usage": True}
        )
    )
    assert chunks[1].choices[0].delta.tool_calls[0].function.name == "lookup"
    assert chunks[2].choices[0].finish_reason == "tool_calls" and chunks[-1].usage.prompt_tokens > 0
    messages += [{"role": "tool", "tool_call_id": "call_1", "content": "Sunny"}]
    plain = client.chat.completions.create(model="m", messages=messages, tools=tools)
    assert plain.choices[0].message.content == "Done."


def test_scrubber_keeps_lengths_and_maps_each_value_once() -> None:
    session = "33b87f5f-e3fe-40e5-a240-0bb68bf4b7a3"
    device = "53c9e42a72294cf4ab6c88d311420b44e1aa48937f8cf1b87b600e764804b9c7"
    scrub = Scrubber({"/tmp/cap-xyz": "/tmp/kvtestbed"})
    value = {
        "h": session,
        "user_id": json.dumps({"device_id": device, "session_id": session}),
        "cwd": "/tmp/cap-xyz/w",
    }
    out = scrub.value(value)
    assert out["h"] == "00000000-0000-4000-8000-000000000001"
    assert json.loads(out["user_id"]) == {"device_id": "0" * 63 + "2", "session_id": out["h"]}
    assert len(out["user_id"]) == len(value["user_id"]) and out["cwd"] == "/tmp/kvtestbed/w"
    assert scrub.text("not-a-uuid 1234") == "not-a-uuid 1234"


def test_fixture_labels_and_repeats() -> None:
    def record(method: str, path: str, body: object) -> dict:
        return {"method": method, "path": path, "query": "", "headers": {"host": "h", "a": "1"}, "body": body}

    tools = [{"name": "t", "input_schema": {}}]
    result = [{"type": "tool_result", "tool_use_id": "x", "content": "y"}]
    rs = [
        record("HEAD", "/", None),
        record("POST", "/v1/messages", {"messages": [{"role": "user", "content": "hi"}]}),
        record("POST", "/v1/messages", {"tools": tools, "messages": [{"role": "user", "content": "hi"}]}),
        record("POST", "/v1/messages", {"tools": tools, "messages": [{"role": "user", "content": result}]}),
        record("POST", "/v1/messages", {"tools": tools, "messages": [{"role": "user", "content": "again"}]}),
        record("GET", "/v1/models", None),
    ]
    assert [label(r) for r in rs[:4]] == ["head", "no-tools", "request", "tool-result"]
    files = fixtures("c", "1.0", rs, Scrubber({}))
    assert list(files) == [
        "c-head.json",
        "c-no-tools.json",
        "c-request.json",
        "c-tool-result.json",
        "c-request-2.json",
        "c-get-v1-models.json",
    ]
    assert files["c-head.json"]["headers"] == {"a": "1"}


def test_committed_fixtures_match_their_manifest() -> None:
    manifest = json.loads((FIXTURES / "manifest.json").read_text())
    listed = {r["file"] for c in manifest["clients"] for r in c.get("requests", [])}
    assert listed == {p.name for p in FIXTURES.glob("*.json")} - {"manifest.json"}
    for client in manifest["clients"]:
        for request in client["requests"]:
            fixture = json.loads((FIXTURES / request["file"]).read_text())
            assert fixture["client"] == client["client"] and fixture["version"] == client["version"]
            secrets = {k: v for k, v in fixture["headers"].items() if k in ("authorization", "x-api-key")}
            assert set(secrets.values()) <= {"<redacted>"}
            if fixture["method"] == "POST":
                assert len(json.dumps(fixture["body"], ensure_ascii=False).encode()) <= 200_000
