"""`bench replay --endpoint`: a server that streams a reply without end (kept in memory until --timeout:
now abandoned at `MAX_REPLY_CHARS`), on both APIs, as text and as tool-call arguments; and a Poisson rate
that would release the requests never (`--request-rate 1e-300`: OverflowError in the sleep)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from engine.bench.__main__ import main
from engine.bench.harness import streamed
from engine.bench.harness.sending import MAX_RELEASE_S
from tests.redteam.cli import one_error_line

CAP = 50_000


def openai_chunk(delta: dict) -> dict:
    return {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"} | {
        "choices": [{"index": 0, "delta": delta, "finish_reason": None}]
    }


def endless(kind: str) -> Iterator[dict]:
    """The events of a reply that never ends."""
    if kind == "openai text":
        while True:
            yield openai_chunk({"content": "la " * 100})
    elif kind == "openai tool call":
        yield openai_chunk(
            {"tool_calls": [{"index": 0, "id": "call_1", "function": {"name": "f", "arguments": ""}}]}
        )
        while True:
            yield openai_chunk({"tool_calls": [{"index": 0, "function": {"arguments": " " * 300}}]})
    else:
        message = {"id": "m", "type": "message", "role": "assistant", "model": "m", "content": []}
        message |= {"stop_reason": None, "usage": {"input_tokens": 1, "output_tokens": 0}}
        yield {"type": "message_start", "message": message}
        block = (
            {"type": "text", "text": ""}
            if kind == "anthropic text"
            else {"type": "tool_use", "id": "t", "name": "f", "input": {}}
        )
        yield {"type": "content_block_start", "index": 0, "content_block": block}
        delta = (
            {"type": "text_delta", "text": "la " * 100}
            if kind == "anthropic text"
            else {"type": "input_json_delta", "partial_json": " " * 300}
        )
        while True:
            yield {"type": "content_block_delta", "index": 0, "delta": delta}


class Endless(BaseHTTPRequestHandler):
    kind = "openai text"

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        try:
            for event in endless(self.kind):
                name = f"event: {event['type']}\n" if "type" in event else ""
                self.wfile.write(f"{name}data: {json.dumps(event)}\n\n".encode())
        except OSError:  # the client closed the stream
            pass


@pytest.mark.parametrize("kind", ["openai text", "openai tool call", "anthropic text", "anthropic tool use"])
def test_an_endless_reply_is_abandoned_at_the_cap(monkeypatch, kind) -> None:
    import anthropic
    import openai

    monkeypatch.setattr(streamed, "MAX_REPLY_CHARS", CAP)
    handler = type("Handler", (Endless,), {"kind": kind})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}"
    try:
        if kind.startswith("openai"):
            api, client = "openai", openai.OpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0)
            body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        else:
            api, client = "anthropic", anthropic.Anthropic(base_url=url, api_key="k", max_retries=0)
            body = {"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}
        start = time.perf_counter()
        ex = streamed.send(api, client, body, 120, streamed.OpenStreams())
        assert time.perf_counter() - start < 60  # not the 120 s timeout
    finally:
        server.shutdown()
        server.server_close()
    assert ex.error == f"reply over {CAP:,} characters: abandoned" and ex.ttft_s is not None


@pytest.mark.parametrize("rate", ["1e-300", "1e-9"])
def test_a_rate_that_never_releases_the_requests_is_one_line(tmp_path, capsys, rate) -> None:
    argv = ["replay", "example:openai-chat", "--endpoint", "http://127.0.0.1:9", "--request-rate", rate]
    line = one_error_line(capsys, main, [*argv, "--out", str(tmp_path / "run")])
    assert f"--request-rate {float(rate):g}: the" in line and f"past {MAX_RELEASE_S:,} s" in line
