"""The server's `Backend` (engine/serve/worker.py): each job is prepared on the preparation threads
(engine/serve/preparation.py), then the engine thread only adds it to the engine's scheduler
(`Engine.add_request`; every `step` batches what is in flight), steps, and aborts. The engine's admission
hook and each step's outputs become the job's events (`Admitted`, `Delta`; `Queued` comes from preparation,
once every check passed); a finished request's report is built on the preparation threads again, and its
`Finished` event sent from there.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.errors import EngineError
from engine.runtime.engine import Engine
from engine.runtime.outputs import Generation, Timing, Usage
from engine.runtime.request import Request
from engine.serve.cache_report import admission_report
from engine.serve.errors import from_engine
from engine.serve.metrics import Metrics
from engine.serve.preparation import Prepared, Preparer
from engine.serve.worker import Aborted, Admitted, Delta, Failed, Finished, Job, Load, Queued

log = logging.getLogger("kvtestbed.serve")


@dataclass
class Flight:
    """A request the engine holds: its job, what preparation made of it, and when things happened."""

    job: Job
    prepared: Prepared
    waited_s: float  # queued -> a preparation thread, then prepared -> the engine thread
    added: float  # perf_counter when the engine thread added it
    admitted: bool = False  # to a step: it no longer counts as waiting
    first_token: float | None = None


class Processor:
    def __init__(self, engine: Engine, preparer: Preparer, metrics: Metrics, load: Load) -> None:
        self.engine, self.preparer, self.metrics, self.load = engine, preparer, metrics, load
        self.flying: dict[str, Flight] = {}  # engine request id -> its flight (engine thread only)
        engine.on_admitted = self._admitted

    # ---- on the preparation threads ---------------------------------------------------------------
    def prepare(self, job: Job, queue: Callable[[Job], None]) -> None:
        self.preparer.pool.submit(self._prepare, job, queue)

    def _prepare(self, job: Job, queue: Callable[[Job], None]) -> None:
        if job.cancelled.is_set():
            self._refuse(job, Aborted(), "aborted")
            return
        try:
            job.prepared = self.preparer.prepare(job.request)
        except Exception as e:  # noqa: BLE001 - every failure goes back to its client as an error body
            self._refuse(job, self._failed(job, e), "failed")
            return
        job.emit(Queued())  # every check passed: a stream opens now, however long the engine's step
        queue(job)

    def _refuse(self, job: Job, event: Failed | Aborted, outcome: str) -> None:
        """End a job that never reached the engine."""
        self.load.leave()
        job.emit(event)
        self.metrics.counted(job.request.api, outcome)

    def _report(self, flight: Flight, gen: Generation) -> None:
        job = flight.job
        assert flight.first_token is not None
        try:
            event: Finished | Failed = self.preparer.finish(
                job.request, flight.prepared, gen, flight.waited_s, flight.first_token
            )
        except Exception as e:  # noqa: BLE001
            event = self._failed(job, e)
        job.emit(event)
        self.metrics.ended(job.request.api, "finished" if isinstance(event, Finished) else "failed")
        if isinstance(event, Finished) and job.cancelled.is_set() and job.unanswered is not None:
            job.unanswered(event)  # it finished as its client left: nobody else records it

    def _report_left(self, flight: Flight, gen: Generation, kv_tokens: int) -> None:
        """The report of a request its client left after its admission, recorded (`aborted`: true)."""
        job = flight.job
        try:
            fin = self.preparer.finish(
                job.request, flight.prepared, gen, flight.waited_s, flight.first_token, kv_tokens
            )
            if job.unanswered is not None:
                job.unanswered(fin)
        except Exception:  # noqa: BLE001 - the client is gone: only the log can tell
            log.exception("the report of abandoned request %s failed", job.request.request_id)

    # ---- on the engine thread -----------------------------------------------------------------------
    def add(self, job: Job) -> None:
        """Queue a prepared request in the engine (or answer it at once: cancelled, refused there)."""
        req, p, picked = job.request, job.prepared, time.perf_counter()
        waited = p.waited_s + (picked - p.done)
        self.metrics.started(waited)
        if job.cancelled.is_set():
            self._end(job, Aborted(), "aborted", waiting=True)
            return
        try:
            rid = self.engine.add_request(
                p.prompt.ids,
                p.max_new_tokens,
                req.temperature,
                req.top_p,
                req.seed,
                req.stop,
                cache_salt=p.cache_salt,  # each served model name (and isolated client) its own namespace
                request_id=req.request_id,
                forced=p.forced,
            )
        except Exception as e:  # noqa: BLE001
            self._end(job, self._failed(job, e), "failed", waiting=True)
            return
        self.flying[rid] = Flight(job, p, waited, picked)

    def _admitted(self, request_id: str, cached_tokens: int) -> None:
        """The engine's admission hook (inside `step`, before its forward)."""
        flight = self.flying.get(request_id)
        if flight is not None:
            flight.admitted = True
            self.load.leave()
            p, block_size = flight.prepared, self.engine.blocks.block_size
            prompt_tokens = len(p.prompt.ids)
            report = admission_report(
                flight.job.request, p.match, prompt_tokens, cached_tokens, block_size, p.cache_scope
            )
            flight.job.emit(Admitted(prompt_tokens, cached_tokens, report))

    def abort(self, job: Job) -> None:
        """The client went away: the engine drops the request and releases its blocks now. One admitted to
        a step has computed K/V that stays in the prefix cache: its report is made and recorded (aborted)."""
        rid = job.request.request_id
        flight = self.flying.pop(rid, None)
        if flight is None:
            return
        held = self.engine.requests.get(rid) if flight.admitted else None
        kv_tokens = held.seq.num_kv if held is not None else 0
        self.engine.abort(rid)
        self._end(job, Aborted(), "aborted", waiting=not flight.admitted)
        if held is not None and kv_tokens > 0:
            self._off_thread(self._report_left, flight, left_generation(held), kv_tokens)

    def has_unfinished(self) -> bool:
        return bool(self.flying)

    def reset_cache(self) -> bool:
        """Forget every cached block (a later request's miss reason then says `evicted`); False, and nothing
        done, while requests are in flight."""
        if self.flying or self.engine.has_unfinished():
            return False
        self.engine.reset_cache()
        return True

    def step(self) -> None:
        """One engine step: every request in flight that sampled a token gets its events."""
        try:
            outputs = self.engine.step()
        except Exception as e:  # noqa: BLE001 - a failed step fails the requests it held, never the server
            for rid, flight in list(self.flying.items()):
                self.engine.abort(rid)
                self._end(flight.job, self._failed(flight.job, e), "failed", not flight.admitted)
            self.flying.clear()
            return
        now = time.perf_counter()
        for out in outputs:
            flight = self.flying.get(out.request_id)
            if flight is None:
                continue
            if out.error is not None:  # this request failed alone in the step; the others go on
                del self.flying[out.request_id]
                self._end(flight.job, self._failed(flight.job, out.error), "failed", not flight.admitted)
                continue
            if flight.first_token is None:
                flight.first_token = now
            if out.text:
                flight.job.emit(Delta(out.text))
            if out.generation is None:
                continue
            del self.flying[out.request_id]
            self.load.served(now - flight.added)
            self.metrics.cache(self.engine.cache_stats())  # the pool as this request left it
            self._off_thread(self._report, flight, out.generation)

    def _off_thread(self, work: Callable[..., None], *args: Any) -> None:
        """Hand `work` to the preparation threads; dropped once they are shut down (the server is stopping:
        its clients have their answers or their errors already)."""
        try:
            self.preparer.pool.submit(work, *args)
        except RuntimeError:  # cannot schedule new futures after shutdown
            log.debug("server stopping: %s not run", work.__name__)

    def _failed(self, job: Job, error: Exception) -> Failed:
        if not isinstance(error, EngineError):
            log.exception("request %s failed", job.request.request_id, exc_info=error)
        return Failed(from_engine(error))

    def _end(self, job: Job, event: Failed | Aborted, outcome: str, waiting: bool) -> None:
        """The job's last event, from the engine thread; `waiting`: it was not admitted to a step yet, so it
        still counted as waiting."""
        if waiting:
            self.load.leave()
        job.emit(event)
        self.metrics.finished(job.request.api, outcome, self.engine.cache_stats())


def left_generation(held: Request) -> Generation:
    """What an aborted request had generated (finish_reason `abort`), from the engine thread."""
    if held.token_times:
        return held.generation("")
    u = Usage(
        held.seq.num_prompt,
        held.cached_tokens,
        held.seq.num_prompt - held.cached_tokens,
        0,
        held.cached_tokens,
        written_tokens=held.seq.num_written,
    )
    return Generation(
        [], "", u, Timing(0.0, held.lookup_s, 0.0), held.seq.token_ids, "abort", steps=held.steps
    )
