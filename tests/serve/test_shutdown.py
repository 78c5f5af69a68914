"""SIGTERM drains: new requests get a 503 in their API's shape, requests in flight finish within the grace
period or end with a 503 (a JSON body for a whole answer, an error event for a stream), and the server
exits with status 0. In-process (a tiny random Qwen2 whose forward a test holds at a gate) for what happens
to each request; a real `python -m engine.serve` process for the signal itself."""

from __future__ import annotations

import asyncio
import json
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import httpx
import pytest

import engine
from engine.serve.app import build_state
from tests.serve.conftest import start, wait_ready
from tests.serve.in_process import Gate, InProcess, serving
from tests.serve.test_pipeline import KEEP_ALIVE, Blocks

MODEL = "tiny"
BODY = {"model": MODEL, "max_tokens": 3, "messages": [{"role": "user", "content": "Tell me about ships."}]}


@pytest.fixture
def gated(tiny_dir: Callable[..., Path]) -> Iterator[tuple[InProcess, Gate]]:
    """A fresh server each time: a drain is for good."""
    model = engine.load(str(tiny_dir("qwen2", tokenizer=True)), device="cpu", cache_tokens=4096)
    gate = Gate(model)
    with serving(build_state(model, [MODEL], keepalive_s=0.05)) as server:
        yield server, gate
        gate.open()


def drain(server: InProcess, grace_s: float) -> Future[None]:
    loop = server.server.servers[0].get_loop()
    return asyncio.run_coroutine_threadsafe(server.state.drain.run(grace_s), loop)


def post_in_thread(url: str, body: dict[str, Any], out: dict[str, httpx.Response]) -> threading.Thread:
    thread = threading.Thread(target=lambda: out.update(reply=httpx.post(url, json=body, timeout=120)))
    thread.start()
    return thread


def test_in_flight_requests_finish_within_the_grace_period_and_new_ones_get_503(
    gated: tuple[InProcess, Gate],
) -> None:
    server, gate = gated
    gate.close()
    out: dict[str, httpx.Response] = {}
    waiting = post_in_thread(server.url + "/v1/chat/completions", BODY, out)
    assert gate.held.wait(60)
    drained = drain(server, grace_s=300)
    for path, shape in (("/v1/chat/completions", "error"), ("/v1/messages", "type")):
        refused = httpx.post(server.url + path, json=BODY, timeout=60)
        assert refused.status_code == 503 and shape in refused.json()
        assert "shutting down" in refused.text and "Traceback" not in refused.text
    gate.open()
    waiting.join(timeout=120)
    assert out["reply"].status_code == 200 and out["reply"].json()["usage"]["completion_tokens"] == 3
    drained.result(timeout=60)


def test_what_is_still_running_after_the_grace_period_ends_with_a_503(gated: tuple[InProcess, Gate]) -> None:
    server, gate = gated
    gate.close()
    out: dict[str, httpx.Response] = {}
    whole = post_in_thread(server.url + "/v1/chat/completions", BODY, out)
    body = BODY | {"stream": True}
    with httpx.stream("POST", server.url + "/v1/messages", json=body, timeout=120) as streamed:
        assert streamed.status_code == 200 and gate.held.wait(60)
        drain(server, grace_s=0).result(timeout=60)
        blocks = [
            b for b in Blocks(streamed).rest() if b != KEEP_ALIVE and b[0] != "event: content_block_delta"
        ]
    whole.join(timeout=120)
    assert out["reply"].status_code == 503
    assert out["reply"].json()["error"]["code"] == "shutting_down"
    assert blocks[-1][0] == "event: error"
    error = json.loads(blocks[-1][1].removeprefix("data: "))
    assert error["type"] == "error" and "shutting down" in error["error"]["message"]
    assert not server.state.drain.answering


def test_a_body_still_arriving_when_the_drain_begins_gets_a_503(gated: tuple[InProcess, Gate]) -> None:
    """The request passed the first check before the drain; its body ends after the drain has ended what was
    in flight: it is refused, not left waiting on an engine nobody will answer it from."""
    server, gate = gated
    gate.close()
    started, go_on = threading.Event(), threading.Event()
    raw = json.dumps(BODY).encode()

    def body() -> Iterator[bytes]:
        yield raw[:10]
        started.set()
        go_on.wait(60)
        yield raw[10:]

    out: dict[str, httpx.Response] = {}
    headers = {"content-type": "application/json", "content-length": str(len(raw))}
    thread = threading.Thread(
        target=lambda: out.update(
            reply=httpx.post(server.url + "/v1/chat/completions", content=body(), headers=headers, timeout=60)
        )
    )
    thread.start()
    assert started.wait(60)
    time.sleep(0.2)  # the head is read and the first check passed: the handler now waits for the body
    drain(server, grace_s=0).result(timeout=60)
    go_on.set()
    thread.join(timeout=90)
    assert out["reply"].status_code == 503
    assert out["reply"].json()["error"]["code"] == "shutting_down"
    assert not server.state.drain.answering


def test_sigterm_drains_the_server_process_and_it_exits_cleanly(
    tmp_path: Path, tiny_dir: Callable[..., Path]
) -> None:
    """A whole answer and a stream on each API in flight at the SIGTERM: the whole answer gets its API's JSON
    error body (not text), each stream its API's error event, and the process exits with 0."""
    model = str(tiny_dir("qwen2", tokenizer=True))
    server = start(["--model", model, "--device", "cpu", "--drain-s", "0"], tmp_path / "serve.log")
    body = BODY | {"model": model, "max_tokens": 8000}
    try:
        wait_ready(server)
        whole: dict[str, httpx.Response] = {}
        waiting = post_in_thread(server.url + "/v1/messages", body, whole)
        with (
            httpx.stream(
                "POST", server.url + "/v1/chat/completions", json=body | {"stream": True}, timeout=120
            ) as openai,
            httpx.stream(
                "POST", server.url + "/v1/messages", json=body | {"stream": True}, timeout=120
            ) as anthropic,
        ):
            streams = Blocks(openai), Blocks(anthropic)
            streams[0].until(lambda b: '"content": "' in b[0] and '"role"' not in b[0])  # generating
            streams[1].until(lambda b: b[0] == "event: content_block_delta")
            deadline = time.monotonic() + 60
            while server.metric("kvtestbed_requests_running") < 3:  # the whole answer too
                assert waiting.is_alive() and time.monotonic() < deadline, whole
                time.sleep(0.05)
            server.process.send_signal(signal.SIGTERM)
            last = [s.rest()[-1] for s in streams]
        waiting.join(timeout=60)
        assert server.process.wait(timeout=60) == 0
    finally:
        if server.process.poll() is None:
            server.process.kill()
            server.process.wait(timeout=10)
    assert json.loads(last[0][0].removeprefix("data: "))["error"]["code"] == "shutting_down"
    assert last[1][0] == "event: error"
    assert json.loads(last[1][1].removeprefix("data: "))["error"]["type"] == "api_error"
    reply = whole["reply"]
    assert reply.status_code == 503 and reply.headers["content-type"] == "application/json"
    assert reply.json()["type"] == "error" and "shutting down" in reply.json()["error"]["message"]
    assert "Traceback" not in server.log.read_text()
