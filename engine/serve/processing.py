"""What the engine thread does with requests (the `Backend` of engine/serve/worker.py): prepare each one
(render with the chat template, tokenize, check the context, find its session), hand it to the engine's
scheduler (`Engine.add_request`; every `step` batches what is in flight), turn the engine's step outputs into
the job's events, and report what the cache did (the `kvtestbed` object, the session's memory, the live page,
the metrics). Runs on the engine thread only."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace

from engine.errors import ContextOverflowError, EngineError
from engine.prompts.chat import render_text
from engine.prompts.regions import RenderedPrompt, common_prefix
from engine.runtime.engine import Engine
from engine.runtime.outputs import Generation
from engine.serve.cache_report import build_report, page_entry
from engine.serve.chat_request import ChatRequest
from engine.serve.errors import from_engine
from engine.serve.metrics import Metrics
from engine.serve.miss_reason import PastRequest, classify
from engine.serve.page import RequestLog
from engine.serve.sessions import SessionMatch, SessionStore
from engine.serve.worker import Aborted, Delta, Failed, Finished, Job, Load, Started
from engine.traces.rendering import TraceRenderer
from engine.traces.request import TraceRequest
from engine.traces.tokens import TokenizedText

log = logging.getLogger("kvtestbed.serve")


@dataclass
class Prepared:
    trace: TraceRequest
    prompt: TokenizedText
    max_new_tokens: int
    match: SessionMatch
    picked: float  # perf_counter when the engine thread took the request
    render_s: float
    tokenize_s: float


@dataclass
class Flight:
    """A request the engine holds: its job, what `prepare` made of it, and when its first token came."""

    job: Job
    prepared: Prepared
    first_token: float | None = None


class Processor:
    def __init__(
        self, engine: Engine, metrics: Metrics, page: RequestLog, load: Load, default_max_tokens: int
    ) -> None:
        self.engine, self.metrics, self.page, self.load = engine, metrics, page, load
        self.default_max_tokens = default_max_tokens
        self.renderer = TraceRenderer(engine.tokenizer, engine.source.eos_ids)
        a, b = ([{"role": "user", "content": c}] for c in ("A", "B"))
        self.sessions = SessionStore(common_prefix(engine.render(a), engine.render(b)))
        self.flying: dict[str, Flight] = {}  # engine request id -> its flight

    def add(self, job: Job) -> None:
        """Prepare a submitted request and queue it in the engine (or answer it at once: cancelled, bad)."""
        req, picked = job.request, time.perf_counter()
        self.metrics.started(picked - req.submitted_clock)
        if job.cancelled.is_set():
            self._end(job, Aborted(), "aborted", waiting=True)
            return
        try:
            p = self.prepare(req, picked)
            rid = self.engine.add_request(
                p.prompt.ids,
                p.max_new_tokens,
                req.temperature,
                req.top_p,
                req.seed,
                req.stop,
                cache_salt=req.model,  # each served model name is its own cache namespace
                request_id=req.request_id,
            )
        except Exception as e:  # noqa: BLE001 - every failure goes back to its client as an error body
            self._fail(job, e, waiting=True)
            return
        self.flying[rid] = Flight(job, p)

    def abort(self, job: Job) -> None:
        """The client went away: the engine drops the request and releases its blocks now."""
        flight = self.flying.pop(job.request.request_id, None)
        if flight is not None:
            self.engine.abort(job.request.request_id)
            self._end(job, Aborted(), "aborted", waiting=flight.first_token is None)

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
                self._fail(flight.job, e, waiting=flight.first_token is None)
            self.flying.clear()
            return
        now = time.perf_counter()
        for out in outputs:
            flight = self.flying.get(out.request_id)
            if flight is None:
                continue
            job = flight.job
            if flight.first_token is None:
                flight.first_token = now
                self.load.leave()
                job.emit(Started(out.prompt_tokens, out.cached_tokens))
            if out.text:
                job.emit(Delta(out.text))
            if out.generation is None:
                continue
            del self.flying[out.request_id]
            try:
                finished = self.finish(job.request, flight.prepared, out.generation, flight.first_token)
            except Exception as e:  # noqa: BLE001
                self._fail(job, e, waiting=False)
                continue
            self.load.served(now - flight.prepared.picked)
            self._end(job, finished, "finished", waiting=False)

    def _fail(self, job: Job, error: Exception, waiting: bool) -> None:
        if not isinstance(error, EngineError):
            log.exception("request %s failed", job.request.request_id, exc_info=error)
        self._end(job, Failed(from_engine(error)), "failed", waiting)

    def _end(self, job: Job, event: Finished | Failed | Aborted, outcome: str, waiting: bool) -> None:
        """The job's last event; `waiting`: it had no first token yet, so it still counted as waiting."""
        if waiting:
            self.load.leave()
        job.emit(event)
        self.metrics.finished(job.request.api, outcome, self.engine.cache_stats())

    def prepare(self, req: ChatRequest, picked: float) -> Prepared:
        key = req.session_id or ""  # implicit sessions share one incremental tokenizer key
        trace = TraceRequest(req.messages, req.tools, session=key, model=req.model)
        t0 = time.perf_counter()
        text = render_text(self.engine.tokenizer, req.messages, req.tools)
        t1 = time.perf_counter()
        prompt = self.renderer.encoder.encode(text, key)
        t2 = time.perf_counter()
        max_new = self._max_new_tokens(len(prompt.ids), req.max_tokens)
        match = self.sessions.resolve(req.session_id, req.session_source, prompt.ids)
        return Prepared(trace, prompt, max_new, match, picked, t1 - t0, t2 - t1)

    def _max_new_tokens(self, prompt_len: int, asked: int | None) -> int:
        """`max_tokens`, checked against the context; refused, never truncated. Unasked: the server's
        default, or what the context leaves if that is less."""
        limit = self.engine.config.max_position_embeddings
        if asked is None and prompt_len < limit:
            return min(self.default_max_tokens, limit - prompt_len)
        if asked is None or prompt_len + asked > limit:
            plus = f" + max_tokens {asked}" if asked is not None else " (no room for one new token)"
            raise ContextOverflowError(
                f"prompt of {prompt_len} tokens{plus} exceeds the model's context of {limit} tokens; "
                "refused (prompts are never truncated)"
            )
        return asked

    def finish(self, req: ChatRequest, p: Prepared, gen: Generation, first_token: float) -> Finished:
        trace = replace(p.trace, session=p.match.session)
        ends = self.renderer.message_ends(trace, p.prompt)
        rendered = RenderedPrompt(p.prompt.ids, p.prompt.text, self.renderer.regions(trace, p.prompt, ends))
        block_size = self.engine.blocks.block_size
        analysis = classify(
            p.match.previous,
            p.prompt.ids,
            req.model,
            req.continues,
            gen.usage.cached_tokens,
            block_size,
            lambda i: rendered.region_at(i).kind,
        )
        self.sessions.remember(
            PastRequest(req.request_id, p.match.session, req.model, p.prompt.ids + gen.token_ids[:-1])
        )
        timing = {
            "queue_s": p.picked - req.submitted_clock + gen.timing.queue_s,  # to the engine, then to a step
            "render_s": p.render_s,
            "tokenize_s": p.tokenize_s,
            "lookup_s": gen.timing.lookup_s,
            "prefill_s": gen.timing.prefill_s,
            "ttft_s": gen.timing.ttft_s,
            "server_ttft_s": first_token - req.submitted_clock,
            "decode_s": gen.timing.decode_s,
            "decode_tokens_per_s": gen.timing.decode_tokens_per_s,
        }
        report = build_report(
            req, p.match, gen, analysis, rendered, self.engine.tokenizer, block_size, timing
        )
        self.page.add(page_entry(req, report, rendered))
        self.metrics.first_token(timing["server_ttft_s"])
        full_text = self.engine.tokenizer.decode(gen.token_ids, skip_special_tokens=True)
        return Finished(gen, report, full_text)
