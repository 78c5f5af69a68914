"""One chat request from the asyncio side: read the body (size limit, JSON), submit the job, wait until the
engine holds it (or refused it) while watching for the client going away, then answer: an error, the whole
response, or a stream, which opens then and sends a keep-alive whenever nothing else was sent for a while.
A client that disconnects (waiting, generating or streaming) has its job aborted, which releases its
blocks; what the engine had computed for it by then is still recorded (`Job.unanswered`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from engine.serve import json_body
from engine.serve.browser import require_json
from engine.serve.chat_request import ChatRequest
from engine.serve.errors import APIError, StreamFailed, from_engine
from engine.serve.limits import BODY_TIMEOUT_S
from engine.serve.outcome import outcome_of
from engine.serve.recorder import Record
from engine.serve.streaming import KeepAlive
from engine.serve.worker import FINAL, EngineWorker, Event, Failed, Finished, Job, Queued

log = logging.getLogger("kvtestbed.serve")
ACCESS_LOG = logging.getLogger("uvicorn.access")  # an abandoned request's line, as uvicorn writes the others
DRAIN_FACTOR = 4  # a refused body up to this many times the limit is read to its end before the 413
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


class ClientGone(Exception):
    """The client disconnected before its answer was ready."""


async def _parts(request: Request, timeout_s: float) -> AsyncIterator[bytes]:
    """The body's parts as they arrive; a 408 once none has come for `timeout_s` (a client that declared
    more than it sends is not waited for forever)."""
    parts = request.stream()
    while True:
        try:
            async with asyncio.timeout(timeout_s):
                part = await anext(parts)
        except StopAsyncIteration:
            return
        except TimeoutError:
            raise APIError(
                408,
                f"request body incomplete: no bytes came for {timeout_s:g} s",
                code="request_timeout",
                headers={"Connection": "close"},
            ) from None
        yield part


async def drain(parts: AsyncIterator[bytes], most: int) -> None:
    """Read and drop the rest of a refused body, up to `most` bytes: a client still sending then reads the
    413 instead of a reset connection (a larger body is cut off: the client may see the reset)."""
    seen = 0
    try:
        async for part in parts:
            seen += len(part)
            if seen > most:
                return
    except (ClientDisconnect, APIError):  # it stopped sending: the 413 goes nowhere, or goes now
        return


async def read_json(request: Request, limit: int, timeout_s: float = BODY_TIMEOUT_S) -> dict[str, Any]:
    """The request body as a JSON object; 413 over `limit` bytes (at once when over `DRAIN_FACTOR` times
    it), 408 when the body stops coming for `timeout_s`, 400 when it is not a JSON object or holds what
    engine/serve/json_body.py refuses; 415 unless it is declared JSON (engine/serve/browser.py)."""
    require_json(request)
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > limit:
        if int(length) <= DRAIN_FACTOR * limit:
            await drain(_parts(request, timeout_s), DRAIN_FACTOR * limit)
        raise APIError(
            413,
            f"request body of {length:.20} bytes is over this server's limit of {limit} bytes",
            code="request_too_large",
            headers={"Connection": "close"},
        )
    body, parts = bytearray(), _parts(request, timeout_s)
    async for part in parts:
        body += part
        if len(body) > limit:
            await drain(parts, DRAIN_FACTOR * limit)
            raise APIError(
                413, f"request body is over this server's limit of {limit} bytes", code="request_too_large"
            )
    return await asyncio.to_thread(json_body.parse, bytes(body))  # a large body parses off the event loop


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


class Pacer:
    """A stream's events, with a `KeepAlive` whenever nothing was written for `interval_s` (queued behind
    other requests, prefilling a long prompt, or generating text that is held back): `written` is told of
    every chunk sent."""

    def __init__(self, job: Job, interval_s: float) -> None:
        self.job, self.interval_s = job, interval_s
        self.loop = asyncio.get_running_loop()
        self.last = self.loop.time()

    async def events(self, first: Event) -> AsyncIterator[Event | KeepAlive]:
        """`first`, then the job's events up to its final one, keep-alives between them."""
        event: Event = first
        yield event
        pending: asyncio.Future[Event] | None = None  # kept across keep-alives: no event is ever lost
        try:
            while not isinstance(event, FINAL):
                pending = pending or asyncio.ensure_future(self.job.events.get())
                wait = self.last + self.interval_s - self.loop.time()
                done, _ = await asyncio.wait({pending}, timeout=max(wait, 0.0))
                if not done:
                    self.last = self.loop.time()
                    yield KeepAlive()
                    continue
                event, pending = pending.result(), None
                yield event
        finally:
            if pending is not None:
                pending.cancel()

    async def written(self, chunks: AsyncIterator[str]) -> AsyncIterator[str]:
        async for chunk in chunks:
            if chunk:
                self.last = self.loop.time()
                yield chunk


@dataclass(frozen=True)
class ChatHandler:
    """How one API answers: its JSON body, its stream, the usage its recording keeps, its error event."""

    body: Callable[[ChatRequest, Finished], dict[str, Any]]
    stream: Callable[[ChatRequest, AsyncIterator[Event | KeepAlive], Record], AsyncIterator[str]]
    usage: Callable[[Finished], dict[str, Any]]
    error_event: Callable[[APIError], str]


async def answer(
    worker: EngineWorker,
    request: Request,
    req: ChatRequest,
    api: ChatHandler,
    record: Record,
    keepalive_s: float,
    answering: set[Job],
) -> Response:
    """Submit the request, then answer it: a stream opens (headers and keep-alives) as soon as the engine
    holds the request, every check passed; a whole answer waits for the last event. `answering` holds the
    jobs being answered, for the drain at shutdown (engine/serve/shutdown.py)."""
    job = Job(req, asyncio.get_running_loop())
    job.unanswered = lambda fin: record(req, fin.generation, api.usage(fin), outcome_of(req, fin).report)
    worker.submit(job)
    answering.add(job)
    watch = DisconnectWatch(request)
    settled = False  # the job has ended, or a stream owns it; otherwise it is aborted on the way out
    streamed = False  # a stream owns it: the stream's end discards it from `answering`
    try:
        event = await watch.next_event(job)  # Queued, or an end: refused, failed, aborted
        if req.stream and isinstance(event, Queued):
            settled = streamed = True
            watch.close()
            pacer = Pacer(job, keepalive_s)
            chunks = pacer.written(api.stream(req, pacer.events(event), record))
            return StreamingResponse(
                _guarded(worker, job, chunks, api, answering),
                media_type="text/event-stream",
                headers=SSE_HEADERS,
            )
        while not isinstance(event, FINAL):
            event = await watch.next_event(job)
        settled = True
        if isinstance(event, Failed):
            raise event.error
        if not isinstance(event, Finished):  # aborted: its client is gone
            return _abandoned(request)
        body = api.body(req, event)
        # the extension object the response carries
        record(req, event.generation, api.usage(event), body["kvtestbed"])
        return JSONResponse(body)
    except ClientGone:
        return _abandoned(request)
    finally:
        watch.close()
        if not settled:  # the client went away, or the server is shutting down
            worker.abort(job)
        if not streamed:
            answering.discard(job)


async def _guarded(
    worker: EngineWorker, job: Job, chunks: AsyncIterator[str], api: ChatHandler, answering: set[Job]
) -> AsyncIterator[str]:
    """The stream; its job is aborted if the stream ends early: the client went away (the response task
    is cancelled) or a bug (logged; the stream ends with an error event, never a traceback)."""
    done = False
    try:
        async for chunk in chunks:
            yield chunk
        done = True
    except StreamFailed as e:  # its error event is sent
        log.error("stream of %s failed", job.request.request_id, exc_info=e.__cause__)
    except Exception as e:  # noqa: BLE001
        log.exception("stream of %s failed", job.request.request_id)
        yield api.error_event(from_engine(e))
    finally:
        answering.discard(job)
        if not done:
            worker.abort(job)


def _abandoned(request: Request) -> Response:
    """The answer to a request whose client left before it: 499, and its access-log line written here, in
    uvicorn's format (uvicorn writes none for a connection that is gone)."""
    client = f"{request.client.host}:{request.client.port}" if request.client else "-"
    path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    version = request.scope.get("http_version", "1.1")
    ACCESS_LOG.info('%s - "%s %s HTTP/%s" %d', client, request.method, path, version, 499)
    return Response(status_code=499)
