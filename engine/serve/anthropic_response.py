"""Anthropic Messages responses: the message body, its usage (`input_tokens` excludes both cache fields:
`cache_read_input_tokens` is what the local cache served, `cache_creation_input_tokens` the prompt's full
blocks past it, which this request wrote), and the SSE stream in the documented event order
(`message_start`, `content_block_start` / `_delta` / `_stop` per block, `message_delta`, `message_stop`).
The `kvtestbed` object rides on the message, or on the stream's `message_delta` event (which carries the
final usage)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from engine.serve.cache_report import written_tokens
from engine.serve.chat_request import ChatRequest, new_id
from engine.serve.outcome import Outcome, outcome_of
from engine.serve.recorder import Record
from engine.serve.streaming import KEEP_ALIVE_COMMENT, KeepAlive, TextStream, sse
from engine.serve.worker import Admitted, Delta, Failed, Finished

STOP = {"end": "end_turn", "stop_sequence": "stop_sequence", "length": "max_tokens", "tool_calls": "tool_use"}


def input_usage(prompt_tokens: int, cached_tokens: int, block_size: int) -> dict[str, int]:
    written = written_tokens(prompt_tokens, cached_tokens, block_size)
    return {
        "input_tokens": prompt_tokens - cached_tokens - written,
        "cache_creation_input_tokens": written,
        "cache_read_input_tokens": cached_tokens,
    }


def usage(fin: Finished) -> dict[str, int]:
    u = fin.generation.usage
    inputs = input_usage(u.prompt_tokens, u.cached_tokens, fin.report["block_size"])
    return inputs | {"output_tokens": u.completion_tokens}


def _tool_uses(out: Outcome) -> list[dict[str, Any]]:
    return [
        {"type": "tool_use", "id": new_id("toolu_"), "name": c.name, "input": c.input}
        for c in out.parsed.calls
    ]


def message(req: ChatRequest, fin: Finished) -> dict[str, Any]:
    out = outcome_of(req, fin)
    text = [{"type": "text", "text": out.parsed.content}] if out.parsed.content else []
    return {
        "id": req.request_id,
        "type": "message",
        "role": "assistant",
        "model": req.model,
        "content": text + _tool_uses(out),
        "stop_reason": STOP[out.reason],
        "stop_sequence": out.stop_sequence,
        "usage": usage(fin),
        "kvtestbed": out.report,
    }


def _start(req: ChatRequest, prompt_tokens: int, cached_tokens: int, block_size: int) -> str:
    inputs = input_usage(prompt_tokens, cached_tokens, block_size)
    head = {"id": req.request_id, "type": "message", "role": "assistant", "model": req.model, "content": []}
    body = head | {"stop_reason": None, "stop_sequence": None, "usage": inputs | {"output_tokens": 0}}
    return sse({"type": "message_start", "message": body}, "message_start")


async def stream(
    req: ChatRequest, events: AsyncIterator[Any], record: Record, block_size: int
) -> AsyncIterator[str]:
    text, block = TextStream(req.stop, req.calls_format), -1  # block: index of the open text block

    def blocks(*items: dict[str, Any]) -> str:
        return "".join(sse(item, item["type"]) for item in items)

    def text_block(shown: str, index: int) -> str:
        opening = (
            []
            if index >= 0
            else [{"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}]
        )
        return blocks(
            *opening,
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": shown}},
        )

    started = False  # message_start is out: keep-alives are `ping` events from then on
    async for event in events:
        if isinstance(event, KeepAlive):
            yield sse({"type": "ping"}, "ping") if started else KEEP_ALIVE_COMMENT
        elif isinstance(event, Admitted):
            yield _start(req, event.prompt_tokens, event.cached_tokens, block_size)
            started = True
        elif isinstance(event, Delta) and (shown := text.feed(event.text)):
            yield text_block(shown, block)
            block = 0
        elif isinstance(event, Failed):
            yield sse(event.error.anthropic_body(), "error")
        elif isinstance(event, Finished):
            out = outcome_of(req, event)
            if rest := text.finish(out.parsed):
                yield text_block(rest, block)
                block = 0
            if block == 0:
                yield blocks({"type": "content_block_stop", "index": 0})
            for i, use in enumerate(_tool_uses(out), start=block + 1):
                arguments = json.dumps(use.pop("input"), ensure_ascii=False)
                yield blocks(
                    {"type": "content_block_start", "index": i, "content_block": use | {"input": {}}},
                    {
                        "type": "content_block_delta",
                        "index": i,
                        "delta": {"type": "input_json_delta", "partial_json": arguments},
                    },
                    {"type": "content_block_stop", "index": i},
                )
            delta = {"stop_reason": STOP[out.reason], "stop_sequence": out.stop_sequence}
            yield sse(
                {"type": "message_delta", "delta": delta, "usage": usage(event), "kvtestbed": out.report},
                "message_delta",
            )
            record(req, usage(event), out.report)
            yield sse({"type": "message_stop"}, "message_stop")
