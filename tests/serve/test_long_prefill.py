"""A short request beside a long prefill, on a real server process on loopback: a tiny Qwen2 prefilling a
7,000-token prompt in 64-token steps (`--max-num-batched-tokens 64`, about 110 chunks), and a short request
(about 30 tokens: one step computes it whole) sent once the long one's stream has opened. Every token of the
short reply arrives before the long request's first: the server hands the short request to the engine between
two steps, and the engine serves it beside the long prefill instead of after it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.serve.clients import openai_client
from tests.serve.conftest import Server, start, stop, wait_ready


@pytest.fixture(scope="module")
def chunked_server(tmp_path_factory: pytest.TempPathFactory, tiny_dir) -> Iterator[Server]:  # type: ignore[no-untyped-def]
    folder: Path = tmp_path_factory.mktemp("long-prefill")
    args = ["--model", str(tiny_dir("qwen2", tokenizer=True)), "--device", "cpu", "--cache-tokens", "16384"]
    args += ["--max-num-batched-tokens", "64", "--replies", "agent", "--served-model-name", "tiny"]
    server = start(args, folder / "server.log")
    try:
        wait_ready(server)
        yield server
    finally:
        stop(server)


def streamed(server: Server, text: str, opened: threading.Event | None = None) -> list[tuple[float, str]]:
    """(arrival time, text) of each content chunk of a streamed chat reply; `opened` set when its headers came
    (the request passed its checks and went to the engine thread)."""
    chunks = []
    stream = openai_client(server).chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": text}], max_tokens=32, stream=True
    )
    if opened is not None:
        opened.set()
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            chunks.append((time.perf_counter(), chunk.choices[0].delta.content))
    return chunks


def test_a_short_reply_comes_whole_before_a_long_prefill_ends(chunked_server: Server) -> None:
    opened, long_chunks = threading.Event(), []
    long = threading.Thread(
        target=lambda: long_chunks.extend(streamed(chunked_server, "word " * 7000, opened))
    )
    long.start()
    try:
        assert opened.wait(120)  # its stream opened: it is prepared and queued for the engine
        deadline = time.monotonic() + 120
        while chunked_server.metric("kvtestbed_requests_running ") < 1:  # admitted: its prefill began
            assert time.monotonic() < deadline, "the long request was never admitted"
            time.sleep(0.05)
        short = streamed(chunked_server, "Say hello.")
    finally:
        long.join(300)
    assert short and long_chunks and not long.is_alive()
    assert "".join(text for _, text in short) == "A scripted reply (kvtestbed --replies agent)."
    assert short[-1][0] < long_chunks[0][0]  # the short reply was whole before the long one's first token
