"""OpenAI Responses API responses: the `response` object, its usage (`input_tokens` includes
`input_tokens_details.cached_tokens`, whole blocks, 0 on a miss; `cache_write_tokens` as Anthropic's
`cache_creation_input_tokens`), and the SSE stream in the documented event order: `response.created` and
`response.in_progress` when the request is admitted to a step, then per output item
`response.output_item.added`, for a message `response.content_part.added`, `response.output_text.delta`s,
`response.output_text.done`, `response.content_part.done`, for a function call
`response.function_call_arguments.delta`s and `.done`, then `response.output_item.done`; last
`response.completed` (`response.incomplete` when the reply was cut at `max_output_tokens`) with the usage.
Every event carries its `sequence_number`. Keep-alives are SSE comments until `response.created`, then
`keepalive` events (`{"type": "keepalive", "sequence_number": n}`), as OpenAI sends them on long streams:
Codex's idle timeout counts events, not comments. The output items are built from the
answer's pieces (engine/serve/streaming.py) in both forms, so a streamed response ends with the same items
as a whole one. The `kvtestbed` object rides on the response object (the last event's, when streaming). A
response not made with `store: false` is kept for `previous_response_id` (engine/serve/response_store.py).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

from engine.serve.chat_request import ChatRequest, new_id
from engine.serve.errors import APIError, StreamFailed, from_engine
from engine.serve.outcome import Outcome, outcome_of
from engine.serve.recorder import Record
from engine.serve.response_store import ResponseStore
from engine.serve.responses_request import input_items
from engine.serve.streaming import KEEP_ALIVE_COMMENT, AnswerStream, KeepAlive, sse
from engine.serve.tool_calls import CallArguments, CallStart, Piece, Text
from engine.serve.worker import Admitted, Delta, Failed, Finished

Event = dict[str, Any]


def usage(fin: Finished) -> dict[str, Any]:
    u = fin.generation.usage
    written = u.written_tokens
    return {
        "input_tokens": u.prompt_tokens,
        "input_tokens_details": {"cached_tokens": u.cached_tokens, "cache_write_tokens": written},
        "output_tokens": u.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": u.prompt_tokens + u.completion_tokens,
    }


class OutputItems:
    """A response's output items, built as the answer's pieces come: a `message` item (one `output_text`
    part) for each run of text, a `function_call` item for each call. `piece` and `close` return the stream
    events each step makes (each a new dict: later steps never change an event already returned)."""

    def __init__(self, req: ChatRequest) -> None:
        self.req = req  # whose calls' ids (`ChatRequest.call_id`) the items carry
        self.items: list[dict[str, Any]] = []
        self.open: dict[str, Any] | None = None

    def piece(self, piece: Piece) -> list[Event]:
        if isinstance(piece, Text):
            opened = self._open_message() if self.open is None or self.open["type"] != "message" else []
            part = self.open["content"][0]
            part["text"] += piece.text
            delta = {"content_index": 0, "delta": piece.text, "logprobs": []}
            return opened + [self._about("response.output_text.delta", delta)]
        if isinstance(piece, CallStart):
            closed = self.close("completed")
            call = {"type": "function_call", "id": new_id("fc_"), "call_id": self.req.call_id(piece.index)}
            return closed + self._add(call | {"name": piece.name, "arguments": "", "status": "in_progress"})
        assert isinstance(piece, CallArguments) and self.open is not None
        self.open["arguments"] += piece.fragment
        return [self._about("response.function_call_arguments.delta", {"delta": piece.fragment})]

    def close(self, status: str) -> list[Event]:
        """End the open item (`status`: completed, or incomplete when the reply was cut inside it)."""
        item = self.open
        if item is None:
            return []
        self.open = None
        item["status"] = status
        index = {"item_id": item["id"], "output_index": len(self.items) - 1}
        if item["type"] == "message":
            part = item["content"][0]
            events = [
                {"type": "response.output_text.done", **index, "content_index": 0}
                | {"text": part["text"], "logprobs": []},
                {"type": "response.content_part.done", **index, "content_index": 0, "part": dict(part)},
            ]
        else:
            done = {"arguments": item["arguments"], "name": item["name"]}
            events = [{"type": "response.function_call_arguments.done", **index} | done]
        done_item = item | ({"content": [dict(p) for p in item["content"]]} if "content" in item else {})
        return events + [
            {"type": "response.output_item.done", "output_index": index["output_index"]} | {"item": done_item}
        ]

    def finish(self, cut: bool) -> list[Event]:
        """The last events: the open item closed; an empty message when the answer had no item at all."""
        events = [] if self.items else self._open_message()
        return events + self.close("incomplete" if cut else "completed")

    def _open_message(self) -> list[Event]:
        closed = self.close("completed")
        message = {"type": "message", "id": new_id("msg_"), "status": "in_progress", "role": "assistant"}
        added = self._add(message | {"content": []})
        part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        self.open["content"].append(part)  # type: ignore[index]
        event = self._about("response.content_part.added", {"content_index": 0, "part": dict(part)})
        return closed + added + [event]

    def _add(self, item: dict[str, Any]) -> list[Event]:
        self.items.append(item)
        self.open = item
        event_item = item | ({"content": []} if "content" in item else {})
        return [
            {"type": "response.output_item.added", "output_index": len(self.items) - 1, "item": event_item}
        ]

    def _about(self, kind: str, fields: dict[str, Any]) -> Event:
        """An event about the open item."""
        assert self.open is not None
        return {"type": kind, "item_id": self.open["id"], "output_index": len(self.items) - 1} | fields


def response_object(req: ChatRequest, status: str, output: list[Any], **final: Any) -> dict[str, Any]:
    """The `response` object; `final`: `usage`, `incomplete_details`, `error`, `kvtestbed` once known."""
    body = req.body
    text = {"format": {"type": "text"}} | {k: v for k, v in (body.get("text") or {}).items() if k != "format"}
    previous = req.notes.get("previous_response_id")
    return {
        "id": req.request_id,
        "object": "response",
        "created_at": int(req.submitted),
        "status": status,
        "background": False,
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "max_tool_calls": None,
        "model": req.model,
        "output": output,
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "previous_response_id": previous["id"] if previous else None,
        "prompt_cache_key": body.get("prompt_cache_key"),
        "reasoning": {"effort": None, "summary": None} | (body.get("reasoning") or {}),
        "safety_identifier": body.get("safety_identifier"),
        "service_tier": "default",
        "store": body.get("store", True),
        "temperature": req.temperature,
        "text": text,
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [],
        "top_logprobs": 0,
        "top_p": req.top_p,
        "truncation": "disabled",
        "usage": None,
        "user": body.get("user"),
        "metadata": body.get("metadata") or {},
    } | final


def _finished(
    req: ChatRequest, fin: Finished, outcome: Outcome, out: OutputItems, kept: ResponseStore
) -> dict[str, Any]:
    """The completed (or incomplete) response object; kept for `previous_response_id` unless `store: false`
    (its output items then also on `req.output`, for the record)."""
    cut = outcome.reason == "length"
    final: dict[str, Any] = {"usage": usage(fin), "kvtestbed": outcome.report}
    if cut:
        final["incomplete_details"] = {"reason": "max_output_tokens"}
    else:
        final["completed_at"] = int(time.time())
    if req.body.get("store", True) is not False:
        kept.keep(req.request_id, req.client.identity, input_items(req.body) + out.items)
        req.output = out.items
    return response_object(req, "incomplete" if cut else "completed", out.items, **final)


def response(req: ChatRequest, fin: Finished, kept: ResponseStore) -> dict[str, Any]:
    outcome, out = outcome_of(req, fin), OutputItems(req)
    for piece in AnswerStream(req.stop, req.calls_format).finish(fin.generation.text):
        out.piece(piece)
    out.finish(outcome.reason == "length")
    return _finished(req, fin, outcome, out, kept)


def _error(e: APIError) -> Event:
    return {"type": "error", "code": e.code, "message": e.message, "param": e.param}


def error_event(e: APIError) -> str:
    """The event a stream ends with when it fails outside its own events (a bug: logged by the handler); a
    failure among them is numbered in their sequence by `stream`."""
    return sse(_error(e) | {"sequence_number": 0}, "error")


async def stream(
    req: ChatRequest, events: AsyncIterator[Any], record: Record, kept: ResponseStore
) -> AsyncIterator[str]:
    """The events of one response, from the engine thread's events (see the module docstring); a failure
    among them (a bug) ends it with an `error` event numbered in their sequence."""
    numbers = itertools.count()
    try:
        async for chunk in _events(req, events, record, kept, numbers):
            yield chunk
    except Exception as e:  # the handler logs it, after this last event
        yield sse(_error(from_engine(e)) | {"sequence_number": next(numbers)}, "error")
        raise StreamFailed from e


async def _events(
    req: ChatRequest,
    events: AsyncIterator[Any],
    record: Record,
    kept: ResponseStore,
    numbers: Iterator[int],
) -> AsyncIterator[str]:
    def send(event: Event) -> str:
        return sse(event | {"sequence_number": next(numbers)}, event["type"])

    answer, out = AnswerStream(req.stop, req.calls_format), OutputItems(req)
    started = False  # response.created is out: keep-alives are `keepalive` events from then on
    async for event in events:
        if isinstance(event, KeepAlive):
            yield send({"type": "keepalive"}) if started else KEEP_ALIVE_COMMENT
        elif isinstance(event, Admitted):
            started = True
            for kind in ("response.created", "response.in_progress"):
                yield send({"type": kind, "response": response_object(req, "in_progress", [])})
        elif isinstance(event, Delta):
            for piece in answer.feed(event.text):
                for e in out.piece(piece):
                    yield send(e)
        elif isinstance(event, Failed):
            error = {"code": event.error.code or "server_error", "message": event.error.message}
            failed = response_object(req, "failed", out.items, error=error)
            yield send({"type": "response.failed", "response": failed})
        elif isinstance(event, Finished):
            outcome = outcome_of(req, event)
            for piece in answer.finish(event.generation.text):
                for e in out.piece(piece):
                    yield send(e)
            for e in out.finish(outcome.reason == "length"):
                yield send(e)
            final = _finished(req, event, outcome, out, kept)
            kind = "response.completed" if final["status"] == "completed" else "response.incomplete"
            # before the last event: a client may go after it
            record(req, event.generation, usage(event), final["kvtestbed"])
            yield send({"type": kind, "response": final})
