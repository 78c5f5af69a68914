"""`--body-timeout-s`: a real server on loopback refuses a body that stops coming (the client declared more
than it sends, then fell silent) with a 408 in the API's error shape once no byte came for that long, and
the flag takes only a positive number of seconds up to an hour."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from engine.serve.__main__ import main
from tests.redteam.cli import one_error_line
from tests.serve.conftest import Server, start, stop, wait_ready

TIMEOUT_S = 2.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, tiny_dir: Callable[..., Path]) -> Iterator[Server]:
    model = tiny_dir("qwen2", tokenizer=True)
    args = [
        "--model",
        str(model),
        "--device",
        "cpu",
        "--cache-tokens",
        "4096",
        "--body-timeout-s",
        str(TIMEOUT_S),
    ]
    started = start(args, tmp_path_factory.mktemp("body-timeout") / "server.log")
    try:
        wait_ready(started)
        yield started
    finally:
        stop(started)


def partial(url: str, path: str, declared: int, sent: bytes) -> tuple[int, dict, float]:
    """Declare `declared` bytes, send `sent`, fall silent: the status, the JSON body and when it came."""
    parts = urlsplit(url)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {declared}\r\n\r\n"
    )
    with socket.create_connection((parts.hostname, parts.port), timeout=60) as s:
        begun = time.monotonic()
        s.sendall(head.encode() + sent)
        got = b""
        while chunk := s.recv(65536):
            got += chunk
        took = time.monotonic() - begun
    status, body = int(got.split(b" ", 2)[1]), json.loads(got.split(b"\r\n\r\n", 1)[1])
    return status, body, took


def test_a_body_that_stops_coming_is_refused_after_the_timeout(server: Server) -> None:
    status, body, took = partial(server.url, "/v1/chat/completions", 1000, b'{"model": "x", "mess')
    assert status == 408 and body["error"]["code"] == "request_timeout", body
    assert f"no bytes came for {TIMEOUT_S:g} s" in body["error"]["message"]
    assert TIMEOUT_S <= took < TIMEOUT_S + 15
    status, body, took = partial(server.url, "/v1/messages", 1000, b'{"model"')
    assert status == 408 and body["type"] == "error" and body["error"]["type"] == "timeout_error", body


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "3601", "soon"])
def test_the_timeout_is_a_positive_number_of_seconds_up_to_an_hour(capsys, value: str) -> None:
    line = one_error_line(capsys, main, ["--model", "smollm2-135m", "--body-timeout-s", value])
    assert "argument --body-timeout-s" in line
