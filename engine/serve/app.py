"""The ASGI app (FastAPI on Starlette): routes, the API key check, error bodies in each API's shape, and the
engine thread's start and stop with the app's lifespan.

Routes: `POST /v1/chat/completions` (OpenAI), `POST /v1/messages` and `POST /v1/messages/count_tokens`
(Anthropic), `POST /v1/responses` (OpenAI Responses), `GET /v1/models`, `GET /v1/kvtestbed/requests` (the
live page's feed), `GET /v1/kvtestbed/kv_blocks` (every block the prefix cache can serve, as `--kv-events`
subscribers index them), `POST /v1/kvtestbed/reset_prefix_cache` and `POST /reset_prefix_cache` (vLLM's
name: empty the prefix cache while idle, else 409), `GET /` (and `HEAD /`) and `/static/*` (the page),
`GET /metrics`.
With an API key every route but the page and `/metrics` needs it (`Authorization: Bearer KEY` or
`x-api-key: KEY`); without one, the request log and the cache's token ids answer only loopback clients.
Browser safety (the Host allowlist, JSON-only bodies, cross-origin refusals, CORS) is engine/serve/browser.py.
No traceback reaches a client: anything unexpected is logged here and answered with a
500 JSON body.
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import logging
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException
from starlette.responses import FileResponse, JSONResponse, Response

from engine.errors import InvalidArgumentError
from engine.prompts.chat import tool_format
from engine.runtime.engine import Engine
from engine.runtime.outputs import Generation
from engine.serve import anthropic_response, openai_response, responses_response
from engine.serve.anthropic_request import parse_messages
from engine.serve.browser import LOOPBACK_HOSTS, local_only, protect
from engine.serve.chat_request import ANTHROPIC, OPENAI, RESPONSES, ChatRequest
from engine.serve.client_session import presented_key
from engine.serve.errors import APIError, from_engine
from engine.serve.handling import ChatHandler, answer, read_json
from engine.serve.kv_events import served_index
from engine.serve.limits import BODY_TIMEOUT_S, MAX_BODY_MB
from engine.serve.metrics import Metrics
from engine.serve.openai_request import parse_openai
from engine.serve.page import STATIC, RequestLog
from engine.serve.preparation import Preparer
from engine.serve.processing import Processor
from engine.serve.recorder import Recorder
from engine.serve.response_store import ResponseStore
from engine.serve.responses_request import parse_responses_request
from engine.serve.scripted_replies import ReplyScript
from engine.serve.shutdown import Drain
from engine.serve.streaming import sse
from engine.serve.worker import EngineWorker, Load

log = logging.getLogger("kvtestbed.serve")
ANTHROPIC_PATHS = ("/v1/messages",)


@dataclass
class ServerState:
    worker: EngineWorker
    preparer: Preparer
    drain: Drain
    metrics: Metrics
    page: RequestLog
    names: list[str]  # served model names; the first is the --model string unless renamed
    block_size: int
    recorder: Recorder | None
    api_key: str | None
    max_body_bytes: int
    keepalive_s: float  # a stream sends a keep-alive after this long without sending anything
    created: int
    tool_format: str  # the tool-call format the model's template teaches (engine/prompts/chat.py)
    responses: ResponseStore  # kept for the Responses API's previous_response_id
    body_timeout_s: float  # a request body with no bytes for this long is refused (408)

    def record(
        self, req: ChatRequest, generation: Generation, usage: dict[str, Any], report: dict[str, Any]
    ) -> None:
        if self.recorder is not None:
            self.recorder.write(req, generation, usage, report)


def build_state(
    engine: Engine,
    names: list[str],
    *,
    recorder: Recorder | None = None,
    api_key: str | None = None,
    max_queue: int = 64,
    max_body_bytes: int = MAX_BODY_MB << 20,
    default_max_tokens: int = 1024,
    max_tokens_cap: int | None = None,
    keepalive_s: float = 5.0,
    isolate_cache: bool = False,
    body_timeout_s: float = BODY_TIMEOUT_S,
    replies: ReplyScript | None = None,
    splice_sampled: bool = True,
) -> ServerState:
    """Everything a server over `engine` holds: the engine thread and its backend, the preparation
    threads, metrics, the page log."""
    if api_key is not None and not api_key.strip():
        raise InvalidArgumentError("the API key is empty: give a key, or None to serve without one")
    metrics, page = Metrics(names[0]), RequestLog()
    preparer = Preparer(
        engine, metrics, page, default_max_tokens, max_tokens_cap, isolate_cache, replies, splice_sampled
    )
    backend = Processor(engine, preparer, metrics, Load(metrics.waiting_now))
    metrics.cache(engine.cache_stats())
    if recorder is not None:
        metrics.recording(lambda: recorder.stopped is None)
    block_size = engine.blocks.block_size
    worker = EngineWorker(backend, max_queue)
    created, calls = int(time.time()), tool_format(engine.tokenizer)
    return ServerState(
        worker,
        preparer,
        Drain(worker),
        metrics,
        page,
        names,
        block_size,
        recorder,
        api_key,
        max_body_bytes,
        keepalive_s,
        created,
        calls,
        ResponseStore(),
        body_timeout_s,
    )


def error_response(request: Request, e: APIError) -> JSONResponse:
    anthropic = request.url.path.startswith(ANTHROPIC_PATHS)
    body = e.anthropic_body() if anthropic else e.openai_body()
    return JSONResponse(body, status_code=e.status, headers=e.headers)


def create_app(
    state: ServerState, *, allowed_hosts: Sequence[str] = LOOPBACK_HOSTS, cors_origins: Sequence[str] = ()
) -> FastAPI:
    """The app over `state`, answering the `allowed_hosts` names, with CORS for `cors_origins` only
    (engine/serve/browser.py)."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        state.worker.start()
        yield
        state.preparer.pool.shutdown(wait=False, cancel_futures=True)
        await asyncio.to_thread(state.worker.stop)
        if state.recorder is not None:
            state.recorder.close()

    app = FastAPI(title="kvtestbed", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)

    def require_key(request: Request) -> None:
        if state.api_key is None:
            return
        given = presented_key(request.headers)
        if not hmac.compare_digest(given.encode(), state.api_key.encode()):
            raise APIError(
                401,
                "missing or wrong API key: send 'Authorization: Bearer KEY' or 'x-api-key: KEY'",
                code="invalid_api_key",
            )

    def require_key_or_local(request: Request) -> None:
        """What shows every client's prompts: the key holder, or without a key this machine only."""
        if state.api_key is None:
            local_only(request)
        require_key(request)

    keyed = [Depends(require_key)]
    private = [Depends(require_key_or_local)]
    openai = ChatHandler(
        openai_response.completion,
        openai_response.stream,
        openai_response.usage,
        lambda e: sse(e.openai_body()),
    )
    anthropic = ChatHandler(
        anthropic_response.message,
        functools.partial(anthropic_response.stream, block_size=state.block_size),
        anthropic_response.usage,
        lambda e: sse(e.anthropic_body(), "error"),
    )
    responses = ChatHandler(
        functools.partial(responses_response.response, kept=state.responses),
        functools.partial(responses_response.stream, kept=state.responses),
        responses_response.usage,
        responses_response.error_event,
    )
    apis = {
        OPENAI: (parse_openai, openai),
        ANTHROPIC: (parse_messages, anthropic),
        RESPONSES: (functools.partial(parse_responses_request, kept=state.responses), responses),
    }

    async def chat(request: Request, api: str) -> Response:
        state.drain.refuse_if_draining()
        body = await read_json(request, state.max_body_bytes, state.body_timeout_s)
        parse, handler = apis[api]
        req = parse(body, request.headers, state.names)
        req.tool_format = state.tool_format
        # again: a drain may have begun while the body was read; from here to `answering.add` nothing awaits,
        # so a request is either refused here or in `answering` when the drain ends the rest
        state.drain.refuse_if_draining()
        try:
            return await answer(
                state.worker, request, req, handler, state.record, state.keepalive_s, state.drain.answering
            )
        except APIError as e:
            if e.status == 429:
                state.metrics.counted(api, "rejected")
            raise

    @app.post("/v1/chat/completions", dependencies=keyed)
    async def chat_completions(request: Request) -> Response:
        return await chat(request, OPENAI)

    @app.post("/v1/messages", dependencies=keyed)
    async def messages(request: Request) -> Response:
        return await chat(request, ANTHROPIC)

    @app.post("/v1/messages/count_tokens", dependencies=keyed)
    async def count_tokens(request: Request) -> dict[str, int]:
        """Anthropic's token count: the prompt as /v1/messages would render and tokenize it."""
        body = await read_json(request, state.max_body_bytes, state.body_timeout_s)
        req = parse_messages(body | {"max_tokens": 1}, request.headers, state.names)
        load = state.worker.load
        load.enter(state.worker.max_queue)  # a count waits for the preparation threads as a request does
        try:
            counted = state.preparer.pool.submit(state.preparer.count_tokens, req)
            return {"input_tokens": await asyncio.wrap_future(counted)}
        finally:
            load.leave()

    @app.post("/v1/responses", dependencies=keyed)
    async def create_response(request: Request) -> Response:
        return await chat(request, RESPONSES)

    @app.get("/v1/models", dependencies=keyed)
    async def models() -> dict[str, Any]:
        listed = [
            {"id": n, "object": "model", "created": state.created, "owned_by": "kvtestbed"}
            for n in state.names
        ]
        return {"object": "list", "data": listed}

    @app.get("/v1/kvtestbed/requests", dependencies=private)
    async def recent(request: Request) -> dict[str, Any]:
        after = request.query_params.get("after", "0")
        if not (after.isascii() and after.isdigit() and len(after) <= 18):  # int() takes '²', not 10**5000
            raise APIError(400, f"after must be a request number (0 or more), got {after!r:.40}", "after")
        recording = state.recorder.status() if state.recorder is not None else None
        return {"requests": state.page.since(int(after)), "recording": recording}

    @app.get("/v1/kvtestbed/kv_blocks", dependencies=private)
    async def kv_blocks() -> dict[str, Any]:
        engine = state.preparer.engine
        entries = await asyncio.to_thread(engine.cache_index)
        index = served_index(entries)
        blocks = [
            {"block_hash": h, "parent_block_hash": p, "token_ids": list(t)} for h, (p, t) in index.items()
        ]
        return {"block_size": state.block_size, "blocks": blocks}

    async def reset_prefix_cache() -> dict[str, Any]:
        if not await asyncio.wrap_future(state.worker.reset_cache()):
            raise APIError(
                409,
                "requests are in flight: the prefix cache is reset only while the server is idle",
                code="busy",
            )
        return {"reset": True}

    for path in ("/v1/kvtestbed/reset_prefix_cache", "/reset_prefix_cache"):
        app.post(path, dependencies=keyed)(reset_prefix_cache)

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(state.metrics.text(), media_type="text/plain; version=0.0.4")

    @app.api_route("/", methods=["GET", "HEAD"])  # Claude Code sends HEAD / before its first request
    async def page() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.exception_handler(APIError)
    async def api_error(request: Request, e: APIError) -> JSONResponse:
        return error_response(request, e)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, e: HTTPException) -> JSONResponse:
        return error_response(
            request, APIError(e.status_code, f"{request.method} {request.url.path}: {e.detail}")
        )

    @app.exception_handler(Exception)
    async def internal_error(request: Request, e: Exception) -> JSONResponse:
        log.exception("%s %s failed", request.method, request.url.path)
        return error_response(request, from_engine(e))

    protect(app, allowed_hosts, cors_origins, error_response)
    return app
