"""One chat request from the asyncio side: read the body (size limit, JSON), queue the job, wait for its
first event while watching for the client going away, then answer: an error, the whole response, or a
stream. A client that disconnects (waiting, generating or streaming) has its job aborted, which releases
its blocks."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from engine.serve.chat_request import ChatRequest
from engine.serve.errors import APIError, from_engine
from engine.serve.recorder import Record
from engine.serve.worker import FINAL, EngineWorker, Event, Failed, Finished, Job

log = logging.getLogger("kvtestbed.serve")
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


class ClientGone(Exception):
    """The client disconnected before its answer was ready."""


async def read_json(request: Request, limit: int) -> dict[str, Any]:
    """The request body as a JSON object; 413 over `limit` bytes, 400 when it is not a JSON object."""
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > limit:
        raise APIError(
            413,
            f"request body of {length} bytes is over this server's limit of {limit} bytes",
            code="request_too_large",
        )
    body = bytearray()
    async for part in request.stream():
        body += part
        if len(body) > limit:
            raise APIError(
                413, f"request body is over this server's limit of {limit} bytes", code="request_too_large"
            )
    try:
        data = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise APIError(400, f"request body is not valid JSON: {e}", code="invalid_json") from None
    if not isinstance(data, dict):
        raise APIError(
            400, f"request body must be a JSON object, got {type(data).__name__}", code="invalid_json"
        )
    return data


class DisconnectWatch:
    """Waits for the client's http.disconnect while the answer is not being sent yet. Closed before a
    stream starts: the streaming response then listens for the disconnect itself."""

    def __init__(self, request: Request) -> None:
        self.task = asyncio.ensure_future(self._wait(request))

    @staticmethod
    async def _wait(request: Request) -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    async def next_event(self, job: Job) -> Event:
        get = asyncio.ensure_future(job.events.get())
        await asyncio.wait({get, self.task}, return_when=asyncio.FIRST_COMPLETED)
        if get.done():
            return get.result()
        get.cancel()
        raise ClientGone

    def close(self) -> None:
        self.task.cancel()


async def events_after(job: Job, first: Event) -> AsyncIterator[Event]:
    """`first`, then the job's events up to its final one."""
    event = first
    yield event
    while not isinstance(event, FINAL):
        event = await job.events.get()
        yield event


@dataclass(frozen=True)
class ChatHandler:
    """How one API answers: its JSON body, its stream, the usage its recording keeps, its error event."""

    body: Callable[[ChatRequest, Finished], dict[str, Any]]
    stream: Callable[[ChatRequest, AsyncIterator[Event], Record], AsyncIterator[str]]
    usage: Callable[[Finished], dict[str, Any]]
    error_event: Callable[[APIError], str]


async def answer(
    worker: EngineWorker, request: Request, req: ChatRequest, api: ChatHandler, record: Record
) -> Response:
    job = Job(req, asyncio.get_running_loop())
    worker.submit(job)
    watch = DisconnectWatch(request)
    settled = False  # the job has ended, or a stream owns it; otherwise it is aborted on the way out
    try:
        event = await watch.next_event(job)
        if req.stream and not isinstance(event, Failed):
            settled = True
            watch.close()
            chunks = api.stream(req, events_after(job, event), record)
            return StreamingResponse(
                _guarded(worker, job, chunks, api), media_type="text/event-stream", headers=SSE_HEADERS
            )
        while not isinstance(event, FINAL):
            event = await watch.next_event(job)
        settled = True
        if isinstance(event, Failed):
            raise event.error
        if not isinstance(event, Finished):  # aborted: its client is gone
            return Response(status_code=499)
        record(req, api.usage(event), event.report)
        return JSONResponse(api.body(req, event))
    except ClientGone:
        return Response(status_code=499)
    finally:
        watch.close()
        if not settled:  # the client went away, or the server is shutting down
            worker.abort(job)


async def _guarded(
    worker: EngineWorker, job: Job, chunks: AsyncIterator[str], api: ChatHandler
) -> AsyncIterator[str]:
    """The stream; its job is aborted if the stream ends early: the client went away (the response task
    is cancelled) or a bug (logged; the stream ends with an error event, never a traceback)."""
    done = False
    try:
        async for chunk in chunks:
            yield chunk
        done = True
    except Exception as e:  # noqa: BLE001
        log.exception("stream of %s failed", job.request.request_id)
        yield api.error_event(from_engine(e))
    finally:
        if not done:
            worker.abort(job)
