"""Claude Code 2.1.197's own requests (tests/fixtures/agents), sent unchanged with their headers (`?beta=true`,
`anthropic-beta`, `x-claude-code-session-id`, ...) to an in-process server over a tiny random Qwen2 with a 32k
context, served under the names Claude Code asks for and with replies capped at 4 tokens (`--max-tokens-cap`):
`HEAD /` answers 200, `count_tokens` counts what `/v1/messages` prefills, and every request (~21k tokens,
`thinking: adaptive`, `context_management`, `output_config`, `max_tokens: 64000`) is answered with a
well-formed stream, the request after the tool call served from the cache."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import engine
from engine.serve.app import build_state
from tests.conftest import edit_config
from tests.serve.in_process import InProcess, serving

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "agents"
NAMES = ["claude-opus-4-8", "claude-haiku-4-5"]
CAP = 4
SENT_ONLY = ("connection", "accept-encoding", "content-length")  # transport headers httpx sets itself


def captured(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text())


@pytest.fixture(scope="module")
def claude_server(
    tiny_dir: Callable[..., Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[InProcess]:
    folder = tmp_path_factory.mktemp("qwen-32k") / "model"
    shutil.copytree(tiny_dir("qwen2", tokenizer=True), folder)
    edit_config(folder, max_position_embeddings=32768)
    model = engine.load(str(folder), device="cpu", cache_tokens=65536)
    with serving(build_state(model, NAMES, max_tokens_cap=CAP)) as server:
        yield server


def send(server: InProcess, name: str) -> httpx.Response:
    data = captured(name)
    headers = {k: v for k, v in data["headers"].items() if k not in SENT_ONLY}
    url = f"{server.url}{data['path']}" + (f"?{data['query']}" if data["query"] else "")
    body = None if data["body"] is None else json.dumps(data["body"]).encode()
    return httpx.request(data["method"], url, content=body, headers=headers, timeout=300)


def events(reply: httpx.Response) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for block in reply.text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if not line.startswith(":"))
        if lines:
            out.append((lines["event"], json.loads(lines["data"])))
    return out


def test_head_and_count_tokens(claude_server: InProcess) -> None:
    assert send(claude_server, "claude-code-head").status_code == 200
    data = captured("claude-code-request")
    headers = {k: v for k, v in data["headers"].items() if k not in SENT_ONLY}
    reply = httpx.post(
        f"{claude_server.url}/v1/messages/count_tokens?beta=true",
        json={k: data["body"][k] for k in ("model", "messages", "system", "tools")},
        headers=headers,
        timeout=120,
    )
    assert reply.status_code == 200 and 15_000 < reply.json()["input_tokens"] < 32_768


def test_every_request_is_answered_unchanged(claude_server: InProcess) -> None:
    reports = {}
    for name in ("claude-code-no-tools", "claude-code-request", "claude-code-tool-result"):
        reply = send(claude_server, name)
        assert reply.status_code == 200, reply.text
        sent = events(reply)
        assert sent[0][0] == "message_start" and sent[-1][0] == "message_stop", name
        delta = next(data for kind, data in sent if kind == "message_delta")
        assert delta["delta"]["stop_reason"] in ("max_tokens", "end_turn", "tool_use")
        reports[name] = delta["kvtestbed"]
    report = reports["claude-code-request"]
    assert report["max_tokens"] == {"asked": 64000, "granted": CAP, "by": "--max-tokens-cap"}
    assert {"thinking", "context_management", "output_config.effort"} <= set(report["not_applied"])
    assert "output_config.format" in reports["claude-code-no-tools"]["not_applied"]
    counted = httpx.post(
        f"{claude_server.url}/v1/messages/count_tokens",
        json={k: v for k, v in captured("claude-code-request")["body"].items() if k != "max_tokens"},
        timeout=120,
    ).json()["input_tokens"]
    assert counted == report["prompt_tokens"]  # what count_tokens says is what the request prefilled
    assert reports["claude-code-tool-result"]["cached_tokens"] > 15_000  # it extends the request before
