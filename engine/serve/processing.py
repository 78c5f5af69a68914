"""What the engine thread does with one request: prepare it (render with the chat template, tokenize, check
the context, find its session), generate, and report what the cache did (the `kvtestbed` object, the
session's memory, the live page, the metrics). Runs on the engine thread only."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
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
from engine.serve.worker import Aborted, Cancelled, Delta, Failed, Finished, Job, Started
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


class Processor:
    def __init__(self, engine: Engine, metrics: Metrics, page: RequestLog, default_max_tokens: int) -> None:
        self.engine, self.metrics, self.page = engine, metrics, page
        self.default_max_tokens = default_max_tokens
        self.renderer = TraceRenderer(engine.tokenizer, engine.source.eos_ids)
        a, b = ([{"role": "user", "content": c}] for c in ("A", "B"))
        self.sessions = SessionStore(common_prefix(engine.render(a), engine.render(b)))

    def run(self, job: Job, generate: Callable[..., Generation]) -> None:
        req, picked = job.request, time.perf_counter()
        self.metrics.started(picked - req.submitted_clock)
        first_token: list[float] = []
        stats = self.engine.blocks.stats  # O(1) counters (cache_stats() also walks the free blocks)
        before = stats.hit_tokens
        outcome = "failed"
        try:
            p = self.prepare(req, picked)

            def on_token(delta: str) -> None:
                if not first_token:
                    first_token.append(time.perf_counter())
                    job.emit(Started(len(p.prompt.ids), stats.hit_tokens - before))  # this admission's hits
                if delta:
                    job.emit(Delta(delta))

            gen = generate(
                on_token,
                prompt=p.prompt.ids,
                max_new_tokens=p.max_new_tokens,
                temperature=req.temperature,
                top_p=req.top_p,
                seed=req.seed,
                stop=req.stop,
                cache_salt=req.model,  # each served model name is its own cache namespace
            )
            job.emit(self.finish(req, p, gen, first_token[0] if first_token else time.perf_counter()))
            outcome = "finished"
        except Cancelled:
            job.emit(Aborted())
            outcome = "aborted"
        except Exception as e:  # noqa: BLE001 - every failure goes back to its client as an error body
            if not isinstance(e, EngineError):
                log.exception("request %s failed", req.request_id)
            job.emit(Failed(from_engine(e)))
        finally:
            self.metrics.finished(req.api, outcome, self.engine.cache_stats())

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
            "queue_s": p.picked - req.submitted_clock,
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
