"""How a request flows through the server, against an in-process server over a tiny random Qwen2 (the offline
Qwen tokenizer, one request in the engine at a time, a keep-alive after 50 ms of silence) whose forward
passes a test can hold at a gate: a stream opens at admission, before any prefill has run (a Chat
Completions stream's role chunk comes with its first token), and keeps alive while its prefill or its turn in
the queue takes as long as it takes; only the engine's own calls run on
the engine thread; a prompt far over the context is refused without tokenizing, and nothing is kept for a
refused prompt. Every wait is for an event (a block of the stream, the gate), none for a clock."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import engine
from engine.arguments import MAX_STOP_CHARS, MAX_STOP_STRINGS
from engine.serve.app import build_state
from tests.serve.in_process import Gate, InProcess, serving

MODEL = "tiny"
BODY = {"model": MODEL, "messages": [{"role": "user", "content": "Tell me about lighthouses."}]}
KEEP_ALIVE = [": keep-alive"]
# Anthropic's keep-alives once the message started: a text block opened empty, then empty deltas in it (Claude
# Code's stream watchdog is reset by every event but `ping`)
TEXT_OPENED = [
    "event: content_block_start",
    'data: {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}',
]
EMPTY_DELTA = [
    "event: content_block_delta",
    'data: {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": ""}}',
]


@pytest.fixture(scope="module")
def gated(tiny_dir: Callable[..., Path]) -> Iterator[tuple[InProcess, Gate]]:
    model = engine.load(
        str(tiny_dir("qwen2", tokenizer=True)), device="cpu", cache_tokens=4096, max_num_seqs=1
    )
    gate = Gate(model)
    with serving(build_state(model, [MODEL], keepalive_s=0.05)) as server:
        yield server, gate
    gate.open()


class Blocks:
    """The SSE blocks (lists of lines) of a streamed response, read as they arrive."""

    def __init__(self, response: httpx.Response) -> None:
        self.lines = response.iter_lines()

    def next(self) -> list[str]:
        block: list[str] = []
        for line in self.lines:
            if line:
                block.append(line)
            elif block:
                return block
        return block

    def until(self, wanted: Callable[[list[str]], bool]) -> tuple[list[list[str]], list[str]]:
        """(the blocks before the first one `wanted` accepts, that block)."""
        skipped = []
        while not wanted(block := self.next()):
            assert block, f"the stream ended before the block wanted; it sent {skipped}"
            skipped.append(block)
        return skipped, block

    def rest(self) -> list[list[str]]:
        out = []
        while block := self.next():
            out.append(block)
        return out


def stream(server: InProcess, path: str, **extra: Any) -> Any:
    body = BODY | {"stream": True, "max_tokens": 4} | extra
    if path == "/v1/responses":
        body = {"model": MODEL, "input": BODY["messages"], "stream": True, "max_output_tokens": 4} | extra
    return httpx.stream("POST", server.url + path, json=body, timeout=120)


@pytest.mark.parametrize(
    ("path", "opening", "keep_alives", "last"),
    [
        (
            "/v1/messages",
            ["event: message_start"],
            [TEXT_OPENED, EMPTY_DELTA, EMPTY_DELTA],
            ["event: message_stop", 'data: {"type": "message_stop"}'],
        ),
        (
            "/v1/responses",
            ["event: response.created", "event: response.in_progress"],
            [["event: keepalive"]] * 3,
            ["event: response.incomplete"],
        ),
    ],
)
def test_a_stream_opens_at_admission_and_keeps_alive_while_it_prefills(
    gated: tuple[InProcess, Gate],
    path: str,
    opening: list[str],
    keep_alives: list[list[str]],
    last: list[str],
) -> None:
    server, gate = gated
    gate.close()
    try:
        with stream(server, path) as response:
            assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-")
            blocks = Blocks(response)
            before, first = blocks.until(lambda b: b != KEEP_ALIVE)
            assert opening[0] in "\n".join(first) and all(b == KEEP_ALIVE for b in before)
            assert all(event in "\n".join(blocks.next()) for event in opening[1:])
            assert gate.held.wait(60) and not gate.opened.is_set()  # admitted; its prefill has not run
            held = [blocks.next()[: len(k)] for k in keep_alives]  # (a keepalive's data: its number)
            assert held == keep_alives  # while the prefill is held
            gate.open()
            rest = [b for b in blocks.rest() if b[: len(keep_alives[-1])] != keep_alives[-1]]
    finally:
        gate.open()
    assert rest[-1][: len(last)] == last and len(rest) >= 4  # the tokens came after


def test_a_chat_stream_sends_its_role_chunk_with_its_first_token(gated: tuple[InProcess, Gate]) -> None:
    """Admitted with its prefill held, a Chat Completions stream sends only SSE comments; its first chunk with
    `choices`, the role chunk, comes once the prefill ran: where TTFT clients (`vllm bench serve`) read the first
    token."""
    server, gate = gated
    gate.close()
    try:
        with stream(server, "/v1/chat/completions") as response:
            assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-")
            blocks = Blocks(response)
            assert gate.held.wait(60) and not gate.opened.is_set()  # admitted; its prefill has not run
            held = [blocks.next() for _ in range(3)]  # the first blocks: sent before the prefill could end
            gate.open()
            _, first = blocks.until(lambda b: b != KEEP_ALIVE)
            rest = blocks.rest()
    finally:
        gate.open()
    assert held == [KEEP_ALIVE] * 3
    assert '"role": "assistant"' in first[0] and '"content"' in rest[0][0] and rest[-1] == ["data: [DONE]"]


def test_a_queued_stream_opens_and_keeps_alive_before_its_turn(gated: tuple[InProcess, Gate]) -> None:
    """With the engine's only slot held by another request's prefill (and the engine thread inside that
    forward), a second stream still gets its headers and keep-alives; its role chunk comes at its turn."""
    server, gate = gated
    gate.close()
    try:
        with stream(server, "/v1/chat/completions") as first:
            holding = Blocks(first)
            assert gate.held.wait(60)
            with stream(server, "/v1/chat/completions") as second:
                assert second.status_code == 200
                waiting = Blocks(second)
                assert [waiting.next() for _ in range(3)] == [KEEP_ALIVE] * 3
                gate.open()
                _, opening = waiting.until(lambda b: b != KEEP_ALIVE)
                assert '"role": "assistant"' in opening[0] and waiting.rest()[-1] == ["data: [DONE]"]
            assert holding.rest()[-1] == ["data: [DONE]"]
    finally:
        gate.open()


def test_only_the_engine_calls_run_on_the_engine_thread(
    gated: tuple[InProcess, Gate], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, _ = gated
    preparer, threads = server.state.preparer, []

    def spy(method: Callable[..., Any]) -> Callable[..., Any]:
        def called(*args: Any, **kwargs: Any) -> Any:
            threads.append(threading.current_thread().name)
            return method(*args, **kwargs)

        return called

    for name in ("prepare", "finish"):
        monkeypatch.setattr(preparer, name, spy(getattr(preparer, name)))
    monkeypatch.setattr(preparer.renderer.encoder, "encode", spy(preparer.renderer.encoder.encode))
    reply = httpx.post(server.url + "/v1/chat/completions", json=BODY | {"max_tokens": 2}, timeout=120)
    assert reply.status_code == 200 and reply.json()["usage"]["completion_tokens"] == 2
    assert len(threads) == 3 and all(t.startswith("kvtestbed-prep") for t in threads), threads


def test_a_huge_prompt_is_refused_without_tokenizing_and_nothing_is_kept(
    gated: tuple[InProcess, Gate], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, _ = gated
    encoder, sessions = server.state.preparer.renderer.encoder, server.state.preparer.sessions
    tokenized: list[int] = []
    encode = encoder.encode
    monkeypatch.setattr(
        encoder, "encode", lambda text, *a, **k: tokenized.append(len(text)) or encode(text, *a, **k)
    )
    huge = {"model": MODEL, "max_tokens": 2, "messages": [{"role": "user", "content": "x" * (30 << 20)}]}
    small: dict[str, httpx.Response] = {}
    beside = threading.Thread(
        target=lambda: small.update(
            reply=httpx.post(server.url + "/v1/chat/completions", json=BODY | {"max_tokens": 2}, timeout=120)
        )
    )
    beside.start()
    refused = httpx.post(
        server.url + "/v1/messages", json=huge, headers={"X-Session-Id": "huge"}, timeout=300
    )
    beside.join(timeout=300)
    error = refused.json()["error"]
    assert refused.status_code == 400 and "refused before tokenizing" in error["message"], error
    assert small["reply"].status_code == 200 and small["reply"].json()["usage"]["completion_tokens"] == 2
    assert all(n < (1 << 20) for n in tokenized)  # only the small request's text was tokenized
    over = {"model": MODEL, "max_tokens": 2, "messages": [{"role": "user", "content": "lighthouse " * 9000}]}
    reply = httpx.post(
        server.url + "/v1/chat/completions", json=over, headers={"X-Session-Id": "over"}, timeout=120
    )
    assert reply.status_code == 400 and "prompt is too long" in reply.json()["error"]["message"]
    assert max(tokenized) > 90_000  # this one was tokenized (under the bound), then refused
    kept = {key.split("\0")[1] for key in encoder.last} | {h.past.session for h in sessions.held}
    assert "" in kept and not {"huge", "over"} & kept  # nothing kept for either


@pytest.mark.parametrize(
    ("path", "field", "many"),
    [("/v1/chat/completions", "stop", 4), ("/v1/messages", "stop_sequences", MAX_STOP_STRINGS)],
)
def test_stop_strings_beyond_the_engines_bounds_are_refused_by_name(
    gated: tuple[InProcess, Gate], path: str, field: str, many: int
) -> None:
    server, _ = gated
    base = BODY | {"max_tokens": 2}
    long = httpx.post(server.url + path, json=base | {field: ["x" * 400_000]}, timeout=120)
    assert long.status_code == 400 and f"{field}[0] has 400,000 characters" in long.text, long.text
    if path == "/v1/chat/completions":
        assert long.json()["error"]["param"] == "stop"
    else:
        too_many = httpx.post(server.url + path, json=base | {field: ["a"] * (many + 1)}, timeout=120)
        assert too_many.status_code == 400 and f"{field} takes at most {many}" in too_many.text
    edge = httpx.post(server.url + path, json=base | {field: ["y" * MAX_STOP_CHARS] * many}, timeout=120)
    assert edge.status_code == 200  # at the bounds: served
