"""Anthropic Messages responses: the message body, its usage (`input_tokens` excludes both cache fields:
`cache_read_input_tokens` is what the local cache served, `cache_creation_input_tokens` the prompt's full
blocks past it, which this request wrote), and the SSE stream in the documented event order
(`message_start`, `content_block_start` / `_delta` / `_stop` per block, `message_delta`, `message_stop`).
The `kvtestbed` object rides on the message; streamed, on `message_start`'s message as far as it is known at
admission (`complete: false`; the SDK's stream keeps that message as its final message) and whole on
`message_delta` (which carries the final usage; the SDK's accumulator copies only its usage and stop fields).

Keep-alives: SSE comments before `message_start` (sent at admission), then content events, not `ping`:
Claude Code's stream watchdog (`CLAUDE_STREAM_IDLE_TIMEOUT_MS`, at least 300 s) is reset by every event but
`ping`. A keep-alive opens a text block (`content_block_start`, empty text) and then sends empty deltas in
the open block (`text_delta` or `input_json_delta` ""); a reply that then turns out to be a tool call leaves
that text block empty. A message's other counts (usage, cost) are unchanged: no extra `message_delta`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from engine.serve.cache_report import expected_written
from engine.serve.chat_request import ChatRequest
from engine.serve.outcome import Outcome, outcome_of
from engine.serve.recorder import Record
from engine.serve.streaming import KEEP_ALIVE_COMMENT, AnswerStream, KeepAlive, sse
from engine.serve.tool_calls import CallArguments, Piece, Text
from engine.serve.worker import Admitted, Delta, Failed, Finished

STOP = {"end": "end_turn", "stop_sequence": "stop_sequence", "length": "max_tokens", "tool_calls": "tool_use"}


def input_usage(prompt_tokens: int, cached_tokens: int, written: int) -> dict[str, int]:
    return {
        "input_tokens": prompt_tokens - cached_tokens - written,
        "cache_creation_input_tokens": written,
        "cache_read_input_tokens": cached_tokens,
    }


def usage(fin: Finished) -> dict[str, int]:
    u = fin.generation.usage
    inputs = input_usage(u.prompt_tokens, u.cached_tokens, u.written_tokens)
    return inputs | {"output_tokens": u.completion_tokens}


def _tool_uses(req: ChatRequest, out: Outcome) -> list[dict[str, Any]]:
    return [
        {"type": "tool_use", "id": req.call_id(i), "name": c.name, "input": c.input}
        for i, c in enumerate(out.parsed.calls)
    ]


def message(req: ChatRequest, fin: Finished) -> dict[str, Any]:
    out = outcome_of(req, fin)
    text = [{"type": "text", "text": out.parsed.content}] if out.parsed.content else []
    return {
        "id": req.request_id,
        "type": "message",
        "role": "assistant",
        "model": req.model,
        "content": text + _tool_uses(req, out),
        "stop_reason": STOP[out.reason],
        "stop_sequence": out.stop_sequence,
        "usage": usage(fin),
        "kvtestbed": out.report,
    }


def _start(req: ChatRequest, admitted: Admitted, block_size: int) -> str:
    """`message_start`, when the request is admitted to a step: its input usage (the cache write expected:
    `expected_written`) and the `kvtestbed` object as far as it is known then."""
    prompt, cached = admitted.prompt_tokens, admitted.cached_tokens
    inputs = input_usage(prompt, cached, expected_written(prompt, cached, block_size))
    head = {"id": req.request_id, "type": "message", "role": "assistant", "model": req.model, "content": []}
    usage = inputs | {"output_tokens": 0}
    body = head | {"stop_reason": None, "stop_sequence": None, "usage": usage, "kvtestbed": admitted.report}
    return sse({"type": "message_start", "message": body}, "message_start")


class _Blocks:
    """The content blocks of a streamed message, opened and closed as the answer's pieces come: a text block
    for text, a `tool_use` block for each call (started with its name, then `input_json_delta` fragments)."""

    def __init__(self, req: ChatRequest) -> None:
        self.req = req
        self.index, self.kind = -1, ""  # the open block ("": none)

    def piece(self, piece: Piece) -> str:
        if isinstance(piece, CallArguments):
            delta = {"type": "input_json_delta", "partial_json": piece.fragment}
            return _event("content_block_delta", index=self.index, delta=delta)
        if isinstance(piece, Text):
            opening = self._open("text", {"type": "text", "text": ""}) if self.kind != "text" else ""
            delta = {"type": "text_delta", "text": piece.text}
            return opening + _event("content_block_delta", index=self.index, delta=delta)
        use = {"type": "tool_use", "id": self.req.call_id(piece.index), "name": piece.name, "input": {}}
        return self._open("tool_use", use)

    def keep_alive(self) -> str:
        """An event that changes nothing the client keeps: a text block opened empty, else an empty delta."""
        if self.kind == "":
            return self._open("text", {"type": "text", "text": ""})
        kind, key = ("text_delta", "text") if self.kind == "text" else ("input_json_delta", "partial_json")
        return _event("content_block_delta", index=self.index, delta={"type": kind, key: ""})

    def _open(self, kind: str, block: dict[str, Any]) -> str:
        closing = self.close()
        self.index, self.kind = self.index + 1, kind
        return closing + _event("content_block_start", index=self.index, content_block=block)

    def close(self) -> str:
        closing = _event("content_block_stop", index=self.index) if self.kind else ""
        self.kind = ""
        return closing


def _event(kind: str, **fields: Any) -> str:
    return sse({"type": kind, **fields}, kind)


async def stream(
    req: ChatRequest, events: AsyncIterator[Any], record: Record, block_size: int
) -> AsyncIterator[str]:
    """The events of one message: `message_start` at admission, keep-alives (SSE comments before it, `ping`
    events after), the content blocks as the answer forms, then `message_delta` and `message_stop`."""
    answer, blocks = AnswerStream(req.stop, req.calls_format), _Blocks(req)
    started = False  # message_start is out: keep-alives are `ping` events from then on
    async for event in events:
        if isinstance(event, KeepAlive):
            yield blocks.keep_alive() if started else KEEP_ALIVE_COMMENT
        elif isinstance(event, Admitted):
            yield _start(req, event, block_size)
            started = True
        elif isinstance(event, Delta):
            for piece in answer.feed(event.text):
                yield blocks.piece(piece)
        elif isinstance(event, Failed):
            yield sse(event.error.anthropic_body(), "error")
        elif isinstance(event, Finished):
            out = outcome_of(req, event)
            for piece in answer.finish(event.generation.text):
                yield blocks.piece(piece)
            yield blocks.close()
            delta = {"stop_reason": STOP[out.reason], "stop_sequence": out.stop_sequence}
            # before the answer's last events: a client may go after them
            record(req, event.generation, usage(event), out.report)
            yield _event("message_delta", delta=delta, usage=usage(event), kvtestbed=out.report)
            yield _event("message_stop")
