"""The review's three: every API records a streamed answer before the event that completes it (a client
that leaves right after reading it does not lose the record), a Responses stream that fails mid-way numbers
its error event in sequence (it was always 0), and cache writes count only the blocks a request wrote (a
block-aligned prompt already cached wrote none, and was billed one)."""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from engine.serve import anthropic_response, openai_response, responses_response
from engine.serve.chat_request import ANTHROPIC, OPENAI, RESPONSES
from engine.serve.errors import StreamFailed
from engine.serve.response_store import ResponseStore
from engine.serve.worker import Delta
from tests.redteam.conftest import MODEL
from tests.redteam.hostile import post
from tests.serve.responses import events, finished, request

STREAMS: dict[str, tuple[str, Callable[..., AsyncIterator[str]], str]] = {
    "openai": (OPENAI, openai_response.stream, '"finish_reason": "stop"'),
    "anthropic": (ANTHROPIC, functools.partial(anthropic_response.stream, block_size=16), "message_delta"),
    "responses": (
        RESPONSES,
        functools.partial(responses_response.stream, kept=ResponseStore()),
        "response.completed",
    ),
}


@pytest.mark.parametrize("api", list(STREAMS))
def test_recorded_before_the_event_that_completes_the_answer(api: str) -> None:
    kind, stream, completing = STREAMS[api]
    req = request(kind, tools=False)
    req.body = {"input": "hi"}
    recorded: list[Any] = []

    async def until_complete() -> None:
        source = _events(events(["Hel", "lo"], finished("Hello")))
        chunks = stream(req, source, lambda *entry: recorded.append(entry))
        async for chunk in chunks:
            if completing in chunk:
                await chunks.aclose()  # the client read it and left: the response task is cancelled
                return

    asyncio.run(until_complete())
    assert len(recorded) == 1


async def _events(items: list[Any]) -> AsyncIterator[Any]:
    for item in items:
        yield item


def test_an_error_event_is_numbered_in_sequence() -> None:
    req = request(RESPONSES, tools=False)
    req.body = {"input": "hi"}

    async def failing() -> AsyncIterator[Any]:
        yield events([], finished("x"))[0]  # admitted: created, in_progress
        yield Delta("Hello")
        raise RuntimeError("a bug in the middle of a stream")

    async def run() -> list[dict[str, Any]]:
        sent = []
        with pytest.raises(StreamFailed):
            async for chunk in responses_response.stream(req, failing(), lambda *_: None, ResponseStore()):
                sent += [json.loads(line[6:]) for line in chunk.splitlines() if line.startswith("data: ")]
        return sent

    sent = asyncio.run(run())
    assert sent[-1]["type"] == "error" and sent[-1]["code"] == "internal_error"
    assert [e["sequence_number"] for e in sent] == list(range(len(sent))) and len(sent) > 3


def test_cache_writes_count_only_blocks_this_request_wrote(open_server) -> None:  # type: ignore[no-untyped-def]
    block = open_server.state.block_size
    text = "word"
    while True:  # a prompt whose tokens fill whole blocks
        body = {"model": MODEL, "max_tokens": 2, "messages": [{"role": "user", "content": text}]}
        counted = post(open_server.url, "/v1/messages/count_tokens", body).json()["input_tokens"]
        if counted % block == 0:
            break
        text += " word"
    first = post(open_server.url, "/v1/messages", body).json()["usage"]
    again = post(open_server.url, "/v1/messages", body).json()["usage"]
    assert first["cache_creation_input_tokens"] == counted - first["cache_read_input_tokens"]
    # all cached but the last block, recomputed for its logits: it was cached already, so nothing written
    assert again["cache_read_input_tokens"] == counted - block
    assert again["cache_creation_input_tokens"] == 0 and again["input_tokens"] == block
    chat = {"model": MODEL, "max_tokens": 2, "messages": body["messages"]}
    report = post(open_server.url, "/v1/chat/completions", chat).json()["kvtestbed"]
    assert report["cache_written_tokens"] == 0
