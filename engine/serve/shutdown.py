"""Shutting down without cutting anyone off: the first SIGTERM (or Ctrl-C) drains the server, a second one
exits at once (uvicorn's own handling).

Draining stops admitting (every new chat request gets a 503 in its API's error shape), lets the requests
being answered finish for a grace period (SIGTERM: `--drain-s`; Ctrl-C: none), then ends the rest with a
503 `shutting_down` error, a JSON body for a whole answer or an error event in its API's format for a
stream, and aborts them in the engine (their blocks released); then uvicorn exits.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from types import FrameType

import uvicorn

from engine.serve.errors import APIError
from engine.serve.worker import EngineWorker, Failed, Job

log = logging.getLogger("kvtestbed.serve")
SENT_S = 5.0  # after the grace period: time for the ended requests' errors to go out


def shutting_down() -> APIError:
    return APIError(503, "the server is shutting down and takes no new requests", code="shutting_down")


class Drain:
    """The requests being answered (`answering`, kept by engine/serve/handling.py) and the drain."""

    def __init__(self, worker: EngineWorker) -> None:
        self.worker = worker
        self.answering: set[Job] = set()
        self.draining = False

    def refuse_if_draining(self) -> None:
        if self.draining:
            raise shutting_down()

    async def run(self, grace_s: float) -> None:
        self.draining = True
        left = len(self.answering)
        log.warning("draining: %d request(s) in flight get %.0f s to finish", left, grace_s)
        if not await self._answered(grace_s):
            log.warning("draining: ending %d request(s) with a 503", len(self.answering))
            for job in list(self.answering):
                job.events.put_nowait(Failed(shutting_down()))  # ahead of anything the engine sends later
                self.worker.abort(job)
            await self._answered(SENT_S)

    async def _answered(self, timeout_s: float) -> bool:
        """Wait until no request is being answered, at most `timeout_s`; whether none is."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self.answering and loop.time() < deadline:
            await asyncio.sleep(0.05)
        return not self.answering


class DrainingServer(uvicorn.Server):
    """uvicorn's server whose first SIGTERM or SIGINT drains the app (SIGTERM with `grace_s`, SIGINT
    with none) before it exits."""

    def __init__(self, config: uvicorn.Config, drain: Drain, grace_s: float) -> None:
        super().__init__(config)
        self.drain, self.grace_s = drain, grace_s
        self.loop: asyncio.AbstractEventLoop | None = None
        self.task: asyncio.Task[None] | None = None  # the drain (held: the loop keeps only weak references)

    async def serve(self, sockets: list | None = None) -> None:
        self.loop = asyncio.get_running_loop()
        await super().serve(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.drain.draining or self.should_exit or self.loop is None:
            super().handle_exit(sig, frame)  # a second signal: uvicorn's own (Ctrl-C twice forces it)
            return
        self.drain.draining = True  # from this instant on, new requests are refused
        grace = self.grace_s if sig == signal.SIGTERM else 0.0
        self.loop.call_soon_threadsafe(self._start, grace)

    def _start(self, grace_s: float) -> None:
        self.task = asyncio.ensure_future(self._drain_then_exit(grace_s))

    async def _drain_then_exit(self, grace_s: float) -> None:
        try:
            await self.drain.run(grace_s)
        finally:
            self.should_exit = True
