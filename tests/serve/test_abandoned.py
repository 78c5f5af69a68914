"""A request its client abandons after its prefill filled the cache: recorded (`aborted`: true) in the
--record file and on the page, and the client's next request is compared with it. An in-process server over
a tiny random Qwen2 whose forward passes the test holds at a gate, so the abort lands mid-generation."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

import engine
from engine.serve.app import build_state
from engine.serve.recorder import Recorder
from tests.serve.in_process import Gate, serving

MODEL = "tiny"
BODY = {
    "model": MODEL,
    "messages": [{"role": "user", "content": "Tell me everything about lighthouses. " * 8}],
    "max_tokens": 64,
    "temperature": 0,
}
KEY = {"Authorization": "Bearer abandoning-client"}


def test_an_abandoned_request_is_recorded_and_remembered(
    tiny_dir: Callable[..., Path], tmp_path: Path
) -> None:
    model = engine.load(str(tiny_dir("qwen2", tokenizer=True)), device="cpu", cache_tokens=4096)
    gate, path = Gate(model), tmp_path / "record.jsonl"
    recorder = Recorder(path)
    with serving(build_state(model, [MODEL], recorder=recorder)) as server:
        url = server.url + "/v1/chat/completions"
        with httpx.stream("POST", url, json=BODY | {"stream": True}, headers=KEY, timeout=60) as response:
            for line in response.iter_lines():
                if line.startswith("data: ") and json.loads(line[6:])["choices"][0]["delta"].get("content"):
                    left = json.loads(line[6:])["id"]  # a token came: the prompt's K/V is in the cache
                    break
            gate.close()  # the next decode step waits until the abort is queued
        deadline = time.monotonic() + 60
        while server.state.drain.answering:  # emptied as the stream's end queues the abort
            assert time.monotonic() < deadline, "the abandoned stream never ended"
            time.sleep(0.05)
        gate.open()
        lines: list[dict] = []
        while not lines:
            assert time.monotonic() < deadline, "the abandoned request was never recorded"
            time.sleep(0.05)
            lines = [json.loads(x) for x in path.read_text().splitlines()]
        (line,) = lines
        report = line["kvtestbed"]
        assert (report["request_id"], report["aborted"], report["finish_reason"]) == (left, True, "abort")
        assert line["usage"]["prompt_tokens"] == report["prompt_tokens"] > 0 and line["body"]["stream"]
        assert line["steps"]["admitted"] >= 1 and line["steps"]["published"]  # its blocks stay cached
        assert 1 <= report["completion_tokens"] < BODY["max_tokens"]
        page = httpx.get(server.url + "/v1/kvtestbed/requests", timeout=60).json()["requests"]
        assert [(r["request_id"], r["aborted"]) for r in page] == [(left, True)]
        again = httpx.post(url, json=BODY | {"max_tokens": 1}, headers=KEY, timeout=60).json()["kvtestbed"]
        assert again["previous_request_id"] == left and again["aborted"] is False
        assert again["cached_tokens"] == again["expected_cached_tokens"] > 0  # it filled the cache


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_a_request_left_before_its_answer_has_an_access_log_line(tiny_dir: Callable[..., Path]) -> None:
    """A whole (not streamed) request whose client gives up while its prefill is held: uvicorn writes no line
    for a connection that is gone; the server writes it, 499, in uvicorn's format."""
    model = engine.load(str(tiny_dir("qwen2", tokenizer=True)), device="cpu", cache_tokens=4096)
    gate = Gate(model)
    with serving(build_state(model, [MODEL])) as server:
        access, seen = logging.getLogger("uvicorn.access"), Lines()
        access.addHandler(seen)  # uvicorn's access logger does not propagate
        level, access.level = access.level, logging.INFO
        gate.close()
        try:
            with pytest.raises(httpx.ReadTimeout):
                httpx.post(server.url + "/v1/chat/completions?x=1", json=BODY, timeout=3)
            deadline = time.monotonic() + 60
            while server.state.drain.answering:  # emptied once the disconnect is seen
                assert time.monotonic() < deadline, "the abandoned request was never answered"
                time.sleep(0.05)
        finally:
            gate.open()
            access.removeHandler(seen)
            access.level = level
    assert any(line.endswith('"POST /v1/chat/completions?x=1 HTTP/1.1" 499') for line in seen.lines), (
        seen.lines
    )
