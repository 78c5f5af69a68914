"""Faults against a real server process (a tiny random Qwen2 with the offline Qwen tokenizer, behind an API
key, one waiting request at most, a 1 MiB body limit, two served names): the key on every route but the
page and /metrics (401), oversized bodies (413), a full queue (429 with Retry-After), a client that
disconnects mid-stream (its request aborted, its blocks released, the next request served), another model
name (its own cache namespace), and the Qwen template's own tool section as a region."""

from __future__ import annotations

import json
import socket
import threading
import time
from typing import Any

import anthropic
import openai

from tests.serve.conftest import KEY, Server, http

MODEL, OTHER = "tiny-qwen", "tiny-qwen-b"
USER = [{"role": "user", "content": "Write a long story about a lighthouse."}]
TOOL = {
    "type": "function",
    "function": {
        "name": "ping",
        "description": "Ping a host",
        "parameters": {"type": "object", "properties": {"host": {"type": "string"}}},
    },
}


def client(server: Server) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key=server.key, max_retries=0, timeout=120)


def wait_for(condition: Any, what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_api_key_on_every_route_but_the_page_and_metrics(qwen_server: Server) -> None:
    url, body = qwen_server.url, {"model": MODEL, "messages": USER, "max_tokens": 1}
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"x-api-key": "wrong"}):
        reply = http("POST", f"{url}/v1/chat/completions", body, headers)
        assert reply.status == 401 and reply.json()["error"]["code"] == "invalid_api_key"
    anthropic_reply = http("POST", f"{url}/v1/messages", body)
    assert anthropic_reply.status == 401 and anthropic_reply.json()["error"]["type"] == "authentication_error"
    for path in ("/v1/models", "/v1/kvtestbed/requests"):
        assert http("GET", url + path).status == 401
        assert http("GET", url + path, headers={"x-api-key": KEY}).status == 200
    for path in ("/", "/static/page.js", "/metrics"):
        assert http("GET", url + path).status == 200
    with anthropic.Anthropic(base_url=url, api_key=KEY, max_retries=0) as sdk:  # sends x-api-key
        assert sdk.messages.create(model=MODEL, max_tokens=2, messages=USER).usage.output_tokens == 2


def test_a_body_over_the_limit_is_refused(qwen_server: Server) -> None:
    big = {"model": MODEL, "max_tokens": 1, "messages": [{"role": "user", "content": "x" * (1 << 20)}]}
    for path, shape in (("/v1/chat/completions", "error"), ("/v1/messages", "type")):
        reply = http("POST", qwen_server.url + path, big, {"x-api-key": KEY})
        assert reply.status == 413 and shape in reply.json()


def running_and_used(server: Server) -> tuple[float, float]:
    return server.metric("kvtestbed_requests_running "), server.metric('kvtestbed_kv_blocks{state="used"}')


def test_a_client_that_disconnects_mid_stream(qwen_server: Server) -> None:
    aborted = 'kvtestbed_requests_total{api="openai-chat",outcome="aborted"}'
    before = qwen_server.metric(aborted)
    stream = client(qwen_server).chat.completions.create(
        model=MODEL, messages=USER, max_tokens=4000, stream=True
    )
    for _, _chunk in zip(range(3), stream, strict=False):
        pass
    assert running_and_used(qwen_server)[0] == 1
    stream.close()
    wait_for(lambda: qwen_server.metric(aborted) == before + 1, "the request to be aborted")
    assert running_and_used(qwen_server) == (0, 0)  # its blocks are released
    reply = client(qwen_server).chat.completions.create(model=MODEL, messages=USER, max_tokens=3)
    assert reply.usage.completion_tokens == 3


def test_a_client_that_disconnects_while_waiting_for_a_whole_answer(qwen_server: Server) -> None:
    aborted = 'kvtestbed_requests_total{api="anthropic",outcome="aborted"}'
    before = qwen_server.metric(aborted)
    body = json.dumps({"model": MODEL, "messages": USER, "max_tokens": 4000}).encode()
    head = f"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: {KEY}\r\nContent-Type: application/json\r\n"
    port = int(qwen_server.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=30) as raw:
        raw.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
        wait_for(lambda: running_and_used(qwen_server)[0] == 1, "the request to run")
    wait_for(lambda: qwen_server.metric(aborted) == before + 1, "the request to be aborted")
    assert running_and_used(qwen_server) == (0, 0)


def test_a_full_queue_answers_429_with_retry_after(qwen_server: Server) -> None:
    long = client(qwen_server).chat.completions.create(
        model=MODEL, messages=USER, max_tokens=4000, stream=True
    )
    next(iter(long))  # running
    queued: dict[str, Any] = {}
    waiting = threading.Thread(
        target=lambda: queued.update(
            reply=client(qwen_server).chat.completions.create(model=MODEL, messages=USER, max_tokens=2)
        )
    )
    waiting.start()
    try:
        wait_for(lambda: qwen_server.metric("kvtestbed_requests_waiting ") == 1, "a waiting request")
        body = {"model": MODEL, "messages": USER}
        refused = http("POST", f"{qwen_server.url}/v1/chat/completions", body, {"x-api-key": KEY})
    finally:
        long.close()
        waiting.join(timeout=120)
    assert refused.status == 429 and int(refused.headers["retry-after"]) >= 1
    assert refused.json()["error"]["code"] == "queue_full"
    assert queued["reply"].usage.completion_tokens == 2


def test_another_model_name_is_another_cache_namespace(qwen_server: Server) -> None:
    sdk, session = client(qwen_server), {"X-Session-Id": "names"}
    messages = [{"role": "system", "content": "Namespaces. " * 20}, {"role": "user", "content": "Hi"}]
    first = sdk.chat.completions.create(model=MODEL, messages=messages, max_tokens=2, extra_headers=session)
    same = sdk.chat.completions.create(model=MODEL, messages=messages, max_tokens=2, extra_headers=session)
    other = sdk.chat.completions.create(model=OTHER, messages=messages, max_tokens=2, extra_headers=session)
    assert first.model_extra["kvtestbed"]["miss_reason"] == "first_request"
    assert (
        same.usage.prompt_tokens_details.cached_tokens > 0
        and same.model_extra["kvtestbed"]["miss_reason"] is None
    )
    ext = other.model_extra["kvtestbed"]
    assert other.usage.prompt_tokens_details.cached_tokens == 0 and ext["miss_reason"] == "model_changed"
    assert ext["expected_cached_tokens"] == same.usage.prompt_tokens_details.cached_tokens


def test_the_template_tool_section_is_a_region(qwen_server: Server) -> None:
    sdk, session = client(qwen_server), {"X-Session-Id": "tools"}
    messages = [{"role": "system", "content": "Tool user."}, {"role": "user", "content": "Ping the router."}]
    sdk.chat.completions.create(
        model=MODEL, messages=messages, tools=[TOOL], max_tokens=2, extra_headers=session
    )
    renamed = {"type": "function", "function": TOOL["function"] | {"name": "ping_host"}}
    reply = sdk.chat.completions.create(
        model=MODEL, messages=messages, tools=[renamed], max_tokens=2, extra_headers=session
    )
    ext = reply.model_extra["kvtestbed"]
    assert ext["miss_reason"] == "tools_changed" and ext["divergence"]["region"] == "tools"
    assert "ping⟂" in ext["divergence"]["text"]
