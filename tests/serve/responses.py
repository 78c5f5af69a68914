"""A finished request made by hand (no model), to check both APIs' bodies and streams against the SDKs'
own types and stream accumulators."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from engine.runtime.outputs import Generation, Timing, Usage
from engine.serve.chat_request import OPENAI, ChatRequest
from engine.serve.worker import Admitted, Delta, Event, Finished

CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


def request(
    api: str = OPENAI, stop: list[str] | None = None, tools: bool = True, stream: bool = True
) -> ChatRequest:
    return ChatRequest(
        api,
        "m",
        [{"role": "user", "content": "hi"}],
        None,
        tools,
        64,
        0.0,
        1.0,
        None,
        stop or [],
        stream,
        True,
        {},
        request_id="id-1",
    )


def finished(
    text: str,
    full_text: str | None = None,
    reason: str = "stop",
    prompt: int = 40,
    cached: int = 16,
    written: int | None = None,
) -> Finished:
    """`written`: the prompt tokens the request entered in the cache (default: its full blocks past `cached`)."""
    written = prompt // 16 * 16 - cached if written is None else written
    usage = Usage(prompt, cached, prompt - cached, 12, cached, written_tokens=written)
    generation = Generation(list(range(12)), text, usage, Timing(0.1, 0.0, 0.1), finish_reason=reason)
    return Finished(
        generation, {"block_size": 16, "cached_tokens": cached}, full_text if full_text is not None else text
    )


def events(pieces: list[str], fin: Finished) -> list[Event]:
    u = fin.generation.usage
    admitted = Admitted(
        u.prompt_tokens, u.cached_tokens, {"cached_tokens": u.cached_tokens, "complete": False}
    )
    return [admitted, *(Delta(p) for p in pieces), fin]


def collect(chunks: AsyncIterator[str]) -> list[tuple[str | None, Any]]:
    """(event name, parsed data) of every SSE event a stream writes."""

    async def gather() -> list[str]:
        return [c async for c in chunks]

    out = []
    for block in "".join(asyncio.run(gather())).strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        data = lines["data"]
        out.append((lines.get("event"), data if data == "[DONE]" else json.loads(data)))
    return out


async def replay(items: list[Event]) -> AsyncIterator[Event]:
    for item in items:
        yield item


def by_event(stream: Callable[[AsyncIterator[Event]], AsyncIterator[str]], items: list[Event]) -> list[str]:
    """What a stream sent after each of `items` (all its chunks for that event, joined)."""
    sent: list[list[str]] = []

    async def source() -> AsyncIterator[Event]:
        for item in items:
            sent.append([])
            yield item

    async def run() -> None:
        async for chunk in stream(source()):
            sent[-1].append(chunk)

    asyncio.run(run())
    return ["".join(chunks) for chunks in sent]


CALL_DELTAS = ['<tool_call>\n{"name": "get_weather", ', '"arguments": {"city": "Pa', 'ris"}}\n</tool_call>']
