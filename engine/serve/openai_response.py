"""OpenAI Chat Completions responses: the completion body, its usage as vLLM reports it (`prompt_tokens`
includes `prompt_tokens_details.cached_tokens`, which is 0 on a miss, whole blocks, never the last prompt
token), and the SSE stream of `chat.completion.chunk`s. The `kvtestbed` object rides on the completion, or
on the stream's last chunk (the usage chunk with `stream_options.include_usage`, else the finish chunk)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from engine.serve.chat_request import ChatRequest
from engine.serve.outcome import Outcome, outcome_of
from engine.serve.recorder import Record
from engine.serve.streaming import KEEP_ALIVE_COMMENT, AnswerStream, KeepAlive, sse
from engine.serve.tool_calls import CallStart, Piece, Text
from engine.serve.worker import Delta, Failed, Finished

FINISH = {"end": "stop", "stop_sequence": "stop", "length": "length", "tool_calls": "tool_calls"}


def usage(fin: Finished) -> dict[str, Any]:
    u = fin.generation.usage
    return {
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "total_tokens": u.prompt_tokens + u.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": u.cached_tokens},
    }


def _tool_calls(req: ChatRequest, out: Outcome) -> list[dict[str, Any]]:
    return [
        {"id": req.call_id(i), "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
        for i, c in enumerate(out.parsed.calls)
    ]


def _delta(req: ChatRequest, piece: Piece) -> dict[str, Any]:
    """A chunk's delta for a piece of the answer: content, a call's start (its id and name, as vLLM sends
    it) or a fragment of its arguments."""
    if isinstance(piece, Text):
        return {"content": piece.text}
    if isinstance(piece, CallStart):
        function = {"name": piece.name, "arguments": ""}
        call = {
            "index": piece.index,
            "id": req.call_id(piece.index),
            "type": "function",
            "function": function,
        }
        return {"tool_calls": [call]}
    return {"tool_calls": [{"index": piece.index, "function": {"arguments": piece.fragment}}]}


def completion(req: ChatRequest, fin: Finished) -> dict[str, Any]:
    out = outcome_of(req, fin)
    message: dict[str, Any] = {"role": "assistant", "content": out.parsed.content}
    if out.parsed.calls:
        message["tool_calls"] = _tool_calls(req, out)
    return {
        "id": req.request_id,
        "object": "chat.completion",
        "created": int(req.submitted),
        "model": req.model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": FINISH[out.reason]}],
        "usage": usage(fin),
        "kvtestbed": out.report,
    }


async def stream(req: ChatRequest, events: AsyncIterator[Any], record: Record) -> AsyncIterator[str]:
    """The chunks of one answer, from the engine thread's events: SSE comments as keep-alives, the role chunk
    with the first token, then the content and the tool calls as they form (admission sends nothing)."""
    head = {
        "id": req.request_id,
        "object": "chat.completion.chunk",
        "created": int(req.submitted),
        "model": req.model,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return sse(head | {"choices": [choice]} | extra)

    answer, opened = AnswerStream(req.stop, req.calls_format), False
    async for event in events:
        if isinstance(event, Delta | Finished) and not opened:
            # The role chunk goes with the first token, as vLLM's server sends it: TTFT clients (`vllm bench
            # serve`) time the first chunk with `choices`, so one sent at admission would read as the first
            # token. Before it, keep-alives are SSE comments, which they skip.
            opened = True
            yield chunk({"role": "assistant", "content": ""})
        if isinstance(event, KeepAlive):
            yield KEEP_ALIVE_COMMENT
        elif isinstance(event, Delta):
            for piece in answer.feed(event.text):
                yield chunk(_delta(req, piece))
        elif isinstance(event, Failed):
            yield sse(event.error.openai_body())
        elif isinstance(event, Finished):
            out = outcome_of(req, event)
            for piece in answer.finish(event.generation.text):
                yield chunk(_delta(req, piece))
            # before the answer's last chunk: a client may go after it
            record(req, event.generation, usage(event), out.report)
            last = {} if req.include_usage else {"kvtestbed": out.report}
            yield chunk({}, FINISH[out.reason], **last)
            if req.include_usage:
                yield sse(head | {"choices": [], "usage": usage(event), "kvtestbed": out.report})
            yield sse("[DONE]")
