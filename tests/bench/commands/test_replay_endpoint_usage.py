"""`bench replay --endpoint` against a server that reports impossible usage (a negative count, more cached
tokens than prompt tokens): a tiny OpenAI-compatible server on a loopback port, in this process, streams
one short reply per request with the usage the test gives it. Each such request is flagged on its row with
the reason, compared with nothing and left out of every token total; the other requests are counted."""

from __future__ import annotations

import csv
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from engine.bench.__main__ import main

USAGES = [  # per request, in the order they arrive
    {"prompt_tokens": -5, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 0}},
    {"prompt_tokens": 12, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 4000}},
    {"prompt_tokens": 40, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 16}},
]


class FakeServer(BaseHTTPRequestHandler):
    """`GET /v1/models` and streamed `POST /v1/chat/completions`, the n-th answered with `USAGES[n]`."""

    served: list[dict[str, Any]] = []

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def _send(self, status: int, kind: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._send(200, "application/json", json.dumps({"data": [{"id": "fake"}]}).encode())

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        usage = USAGES[len(self.served)]
        self.served.append(body)
        head = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "fake"}
        chunks = [
            head | {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "ok"}}]},
            head | {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            head | {"choices": [], "usage": usage},
        ]
        events = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
        self._send(200, "text/event-stream", events.encode())


@pytest.fixture
def fake_url() -> Iterator[str]:
    FakeServer.served = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), FakeServer)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


def test_impossible_usage_is_flagged_and_left_out_of_the_sums(fake_url, qwen_dir, tmp_path: Path) -> None:
    turns = [[{"role": "user", "content": "Name a colour."}]]
    turns.append([*turns[0], {"role": "assistant", "content": "ok"}, {"role": "user", "content": "Another?"}])
    turns.append(
        [*turns[1], {"role": "assistant", "content": "ok"}, {"role": "user", "content": "One more?"}]
    )
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(json.dumps({"session_id": "s", "body": {"messages": m}}) + "\n" for m in turns))
    out = tmp_path / "out"
    argv = ["replay", str(trace), "--endpoint", fake_url, "--model", str(qwen_dir), "--out", str(out)]
    assert main([*argv, "--max-tokens", "2"]) == 0
    assert len(FakeServer.served) == 3
    result = json.loads((out / "endpoint.json").read_text())
    status = [r["status"] for r in result["requests"]]
    assert status == [
        "impossible usage: negative count: usage.prompt_tokens -5",
        "impossible usage: usage.prompt_tokens_details.cached_tokens 4000 > 12 prompt tokens",
        "ok",
    ]
    assert [r["agrees"] for r in result["requests"][:2]] == [None, None]  # compared with nothing
    summary = result["summary"][0]
    assert summary["impossible_usage"] == 2 and summary["errors"] == 0 and summary["compared"] == 1
    assert summary["prompt_tokens"] == 40 and summary["cached_reported"] == 16  # the third request's alone
    assert summary["n"] == 3  # every answered request was timed
    with (out / "requests.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert (
        rows[0]["status"].startswith("impossible usage: negative count") and rows[0]["prompt_tokens"] == "-5"
    )
    report = (out / "report.md").read_text()
    assert "Impossible usage (left out of every total):" in report
    assert "- s request 2: usage.prompt_tokens_details.cached_tokens 4000 > 12 prompt tokens" in report
