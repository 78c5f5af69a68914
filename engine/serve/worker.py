"""The engine thread: the one thread that owns the `Engine`.

The asyncio side submits `Job`s (and aborts them); the `Backend` prepares each one off this thread
(engine/serve/processing.py: render, tokenize and check on the preparation threads) and hands it to the
command queue, which the thread drains between engine steps: it only adds, steps and aborts. Each job's
events (`Queued`, `Admitted`, `Delta`, then `Finished`, `Failed` or `Aborted`) go back to that job's
asyncio queue with `loop.call_soon_threadsafe`. A prefix-cache reset is a command too: the thread empties
the cache between two steps, only when no request is in flight.
"""

from __future__ import annotations

import asyncio
import math
import queue
import statistics
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Protocol

from engine.runtime.outputs import Generation
from engine.serve.chat_request import ChatRequest
from engine.serve.errors import APIError


@dataclass(frozen=True)
class Queued:
    """Prepared, and every check passed: the request goes to the engine thread (a stream opens now)."""


@dataclass(frozen=True)
class Admitted:
    """The scheduler admitted the request to a step: its prefix is looked up (cached tokens known), its
    prefill starts. `report`: the `kvtestbed` object as far as it is known now (`admission_report`)."""

    prompt_tokens: int
    cached_tokens: int
    report: dict[str, Any]


@dataclass(frozen=True)
class Delta:
    text: str  # raw generated text (streams filter it: engine/serve/streaming.py)


@dataclass(frozen=True)
class Finished:
    generation: Generation
    report: dict[str, Any]  # the `kvtestbed` extension object
    full_text: str  # the generated text before stop sequences were cut


@dataclass(frozen=True)
class Failed:
    error: APIError


@dataclass(frozen=True)
class Aborted:
    """The client went away; the request's blocks are released."""


Event = Queued | Admitted | Delta | Finished | Failed | Aborted
FINAL = (Finished, Failed, Aborted)


class Job:
    def __init__(self, request: ChatRequest, loop: asyncio.AbstractEventLoop) -> None:
        self.request, self.loop = request, loop
        self.events: asyncio.Queue[Event] = asyncio.Queue()
        self.cancelled = threading.Event()  # set by the asyncio side; read by the other threads
        self.prepared: Any = None  # what the backend's preparation made of the request
        # How the request is recorded when its client has gone but the engine worked on it (it filled the
        # cache): called from a preparation thread with its report (`aborted` true when it was cut short).
        self.unanswered: Callable[[Finished], None] | None = None

    def emit(self, event: Event) -> None:
        """From the engine thread: deliver `event` to the asyncio side."""
        self.loop.call_soon_threadsafe(self.events.put_nowait, event)


class Load:
    """Waiting requests and recent service times, shared by both threads (the 429 check, Retry-After)."""

    def __init__(self, on_change: Callable[[int], None]) -> None:
        self.lock, self.waiting, self.on_change = threading.Lock(), 0, on_change
        self.recent_s: deque[float] = deque(maxlen=16)

    def enter(self, limit: int) -> None:
        with self.lock:
            if self.waiting >= limit:
                recent = statistics.median(self.recent_s) if self.recent_s else 1.0
                wait = max(1, math.ceil(recent * (self.waiting + 1)))
                raise APIError(
                    429,
                    f"the queue is full ({self.waiting} requests waiting, --max-queue {limit}); retry later",
                    code="queue_full",
                    headers={"Retry-After": str(wait)},
                )
            self.waiting += 1
            self.on_change(self.waiting)

    def leave(self) -> None:
        with self.lock:
            self.waiting -= 1
            self.on_change(self.waiting)

    def served(self, seconds: float) -> None:
        with self.lock:
            self.recent_s.append(seconds)


class Backend(Protocol):
    load: Load

    def prepare(self, job: Job, queue: Callable[[Job], None]) -> None:
        """Prepare `job` off the engine thread, then `queue` it for the engine thread (or end it: failed,
        or cancelled)."""

    def add(self, job: Job) -> None: ...
    def abort(self, job: Job) -> None: ...
    def has_unfinished(self) -> bool: ...
    def step(self) -> None: ...
    def reset_cache(self) -> bool: ...


class EngineWorker:
    def __init__(self, backend: Backend, max_queue: int) -> None:
        self.backend, self.load, self.max_queue = backend, backend.load, max_queue
        self.commands: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()  # (kind, Job / Future / None)
        self.thread = threading.Thread(target=self._loop, name="kvtestbed-engine", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def submit(self, job: Job) -> None:
        """Take a job (429 when --max-queue requests are waiting already): prepared, then queued here."""
        self.load.enter(self.max_queue)
        job.request.mark_submitted()
        self.backend.prepare(job, lambda prepared: self.commands.put(("add", prepared)))

    def abort(self, job: Job) -> None:
        job.cancelled.set()
        self.commands.put(("abort", job))

    def reset_cache(self) -> Future[bool]:
        """Empty the prefix cache from the engine thread: True, or False while requests are in flight."""
        done: Future[bool] = Future()
        self.commands.put(("reset", done))
        return done

    def stop(self, timeout_s: float = 10.0) -> None:
        self.commands.put(("stop", None))
        self.thread.join(timeout_s)

    def _commands(self, block: bool) -> list[tuple[str, Any]]:
        try:
            out = [self.commands.get(block=block)]
        except queue.Empty:
            return []
        while True:
            try:
                out.append(self.commands.get_nowait())
            except queue.Empty:
                return out

    def _loop(self) -> None:
        while True:
            for kind, job in self._commands(block=not self.backend.has_unfinished()):
                if kind == "stop":
                    return
                assert job is not None
                if kind == "reset":
                    job.set_result(self.backend.reset_cache())
                elif kind == "add":
                    self.backend.add(job)
                else:
                    self.backend.abort(job)
            self.backend.step()
