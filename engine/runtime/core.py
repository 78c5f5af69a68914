"""`EngineCore`: the request lifecycle over one model and one prefix-cached KV pool (vLLM's engine core).

A request is added (`add_request`), then every `step` runs one batch the scheduler builds (decode tokens of
running requests and prompt chunks of new ones, see engine/runtime/scheduler.py): each request's cached
block prefix is looked up at admission and only the rest computed, at its true positions; full blocks are
published as they fill, so the next turn of a conversation, or another request in flight, reuses them.

A request's failure is its own: a forward that raises is retried request by request, and a request whose
forward or logits fail is aborted with its error (`StepOutput.error`) while the others go on; every
request either gets its step's token or is failed, so the engine is usable after any step. Public methods
run under one lock (`serialized`): calls from several threads take turns.
"""

from __future__ import annotations

import functools
import itertools
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import torch

from engine.arguments import boolean, string
from engine.devices import mark, now
from engine.errors import InvalidArgumentError, NumericalError
from engine.kv.sequence import SequenceState
from engine.kv.window import KVWindow
from engine.model.sampling import sample_rows
from engine.prompts.encoder import Prompt
from engine.runtime.loaded import LoadedModel
from engine.runtime.outputs import CacheSteps, StepOutput
from engine.runtime.prefill_share import PrefillShare
from engine.runtime.request import Request, SamplingParams
from engine.runtime.runner import ModelRunner
from engine.runtime.scheduler import Scheduler

Method = TypeVar("Method", bound=Callable[..., Any])
NON_FINITE = (
    "the model produced NaN or infinite logits; in float16 this is usually an overflow "
    "(try --dtype bfloat16 or float32)"
)


def serialized(method: Method) -> Method:
    """Run the method under the engine's lock: calls from several threads take turns (a thread's
    `generate` runs to its end before another's starts), never interleaving inside the engine's state."""

    @functools.wraps(method)
    def locked(self: EngineCore, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return method(self, *args, **kwargs)

    return locked  # type: ignore[return-value]


class EngineCore(LoadedModel):
    """The request lifecycle over a `LoadedModel` (its weights, tokenizer, KV pool and block manager)."""

    def __init__(self, *args: Any, max_num_seqs: int = 64, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.max_num_seqs = max_num_seqs
        self.runner = ModelRunner(self.model, self.kv, self.device, self.attention_backend)
        # prefill_chunk is the step's token budget: a longer prompt is prefilled over several steps
        self.scheduler = Scheduler(self.blocks, max_num_seqs, self.prefill_chunk)
        self.requests: dict[str, Request] = {}
        self._ids = itertools.count()
        self._salts = itertools.count()  # private requests' own salts
        self._ready: list[StepOutput] = []
        self.steps = 0  # steps scheduled so far: the number of the latest (`CacheSteps`)
        self._lock = threading.RLock()
        # Which steps hold the long prefills, so that other requests keep their pace beside them
        self.share = PrefillShare(self.scheduler)
        # Called from `step` with (request id, cached tokens) when a request is first admitted (its prefix
        # looked up), before that step's forward: a server opens the request's stream then.
        self.on_admitted: Callable[[str, int], None] | None = None

    # ---- requests ------------------------------------------------------------------------------------
    @serialized
    def add_request(
        self,
        prompt: Prompt,
        max_new_tokens: int = 64,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        stop: str | Sequence[str] | None = None,
        *,
        cache: bool | None = None,
        cache_salt: str = "",
        return_logits: bool = False,
        ignore_eos: bool = False,
        request_id: str | None = None,
        forced: Sequence[int] | None = None,
    ) -> str:
        """Queue a request; its id. Checked here: arguments, the model's context, and that the pool could
        ever hold it (a request that fits waits, or preempts, for room). `cache=False` (or an engine loaded
        with cache=False) runs it on the same path under a salt of its own: its lookup misses, nothing is
        published, and it evicts a cached block only when no empty one is left (the cold arm of a cache
        measurement, which then differs from the warm one only in the hit).
        `cache_salt` isolates tenants: blocks hashed under one salt never serve another. `ignore_eos` decodes
        exactly max_new_tokens tokens (for benchmarks that fix output lengths). `forced`: a scripted reply, its
        tokens appended in place of the sampled ones, step by step (each forward runs as for a sampled reply)."""
        params = SamplingParams.checked(
            max_new_tokens, temperature, top_p, seed, stop, return_logits, ignore_eos
        )
        private = not (self.cache_enabled and (cache is None or boolean("cache", cache)))
        rid = string("request_id", request_id) if request_id is not None else f"req-{next(self._ids)}"
        if rid in self.requests:
            raise InvalidArgumentError(f"request_id {rid!r} is already in flight")
        encoded = self.prompts.encode(prompt)
        self.check_context(len(encoded.ids), params.max_new_tokens)
        generator = torch.Generator().manual_seed(params.seed) if params.seed is not None else None
        salt = string("cache_salt", cache_salt)
        seq = SequenceState(list(encoded.ids), salt=f"\0private:{next(self._salts)}" if private else salt)
        times = (now(self.device), encoded.render_s, encoded.tokenize_s)
        req = Request(rid, seq, params, times[0], private, *times[1:], generator, decode=self._text)
        if forced is not None:
            if not forced:
                raise InvalidArgumentError("forced: a scripted reply needs at least one token")
            req.forced = tuple(self.prompts.encode(list(forced)).ids)  # checked as a prompt's ids are
        return self._enqueue(req)

    @serialized
    def add_prefilled(
        self,
        token_ids: Sequence[int],
        window: KVWindow,
        logits: torch.Tensor,
        max_new_tokens: int,
        cached_tokens: int = 0,
        approximate_tokens: int = 0,
        *,
        arrival: float | None = None,
    ) -> str:
        """Queue a prompt whose K/V something else computed into a private window (the approximate assemblies
        of engine/approx), with its last token's logits: its first token is their argmax now; at admission
        its window is copied into pool blocks of its own (`Timing.copy_s`, never published), and the step
        loop decodes the rest greedily there (logits of every step kept)."""
        params = SamplingParams.checked(max_new_tokens, 0.0, 1.0, None, None, True)
        seq = SequenceState(list(token_ids), salt=f"\0private:{next(self._salts)}")
        seq.num_kv = len(seq)
        req = Request(
            f"req-{next(self._ids)}",
            seq,
            params,
            now(self.device),
            private=True,
            prefilled=True,
            window=window,
            decode=self._text,
        )
        req.arrival = req.arrival if arrival is None else arrival
        req.cached_tokens, req.approximate_tokens, req.admitted = (
            cached_tokens,
            approximate_tokens,
            req.arrival,
        )
        t = now(self.device)
        self._enqueue(req)
        self._ready.append(self._append(req, int(logits.argmax()), logits, t, t))
        return req.id

    def _enqueue(self, req: Request) -> str:
        self.scheduler.add(req)  # refuses a request the pool could never hold
        self.requests[req.id] = req
        return req.id

    @serialized
    def step(self) -> list[StepOutput]:
        """Run one scheduled batch; one output per request that sampled a token in it, or that failed in it
        (`StepOutput.error`: its forward or its logits failed; it is aborted, the others go on)."""
        ready, self._ready = self._ready, []
        if ready:  # first tokens of prefilled requests, sampled when they were added
            return ready
        # One synchronization per step, the sampled tokens' transfer: scheduling and lookup are host work
        # (host clock), and the forward's end is a mark on the device's queue, resolved after it.
        t0, share_t0 = time.perf_counter(), self.share.clock()
        scheduled = self.scheduler.schedule(hold_prefills=self.share.hold())
        t_lookup = time.perf_counter()
        self.steps += 1
        for req in scheduled.admitted:
            if req.admitted is None:  # the first admission: what the prompt got from the cache
                req.admitted, req.lookup_s, req.cached_tokens = t0, t_lookup - t0, req.seq.num_cached
                req.steps = CacheSteps(self.steps)
                if self.on_admitted is not None:
                    self.on_admitted(req.id, req.cached_tokens)
            if req.window is not None:  # a prefilled request's K/V into its blocks, timed apart
                t = now(self.device)
                req.window.copy_into(self.kv, req.seq.block_table, req.seq.num_kv)
                req.window, req.copy_s = None, now(self.device) - t
        if not scheduled.work:
            return []
        sampling, logits, failed = self.runner.run_isolating(scheduled.work)
        forward_done = mark(self.device)
        outputs = [self._fail(req, error) for req, error in failed]
        for req, _ in scheduled.work:
            if req.finish_reason is None:
                hashed = len(req.seq.block_hashes)
                self.blocks.publish(req.seq, enter=not req.private)
                if req.steps is not None and not req.private and len(req.seq.block_hashes) > hashed:
                    req.steps.note(self.steps, len(req.seq.block_hashes) * self.blocks.block_size)
        params = [(r.params.temperature, r.params.top_p, r.generator) for r in sampling]
        tokens = sample_rows(logits, params)
        t_sampled = time.perf_counter()
        t_forward = forward_done()
        for i, (req, token) in enumerate(zip(sampling, tokens, strict=True)):
            try:
                if token is None:
                    raise NumericalError(NON_FINITE)
                outputs.append(self._append(req, req.next_token(token), logits[i], t_forward, t_sampled))
            except Exception as error:  # noqa: BLE001 - the request fails alone; the step goes on
                outputs.append(self._fail(req, error))
        self.share.after(scheduled, self.share.clock() - share_t0)
        return outputs

    @serialized
    def abort(self, request_id: str) -> bool:
        """Stop a request (its blocks released at once); False if no such request is in flight."""
        req = self.requests.pop(request_id, None)
        if req is not None:
            req.finish_reason = "abort"
            self.scheduler.finish(req)
        return req is not None

    def in_flight(self, request_id: str) -> bool:
        """Whether a request is queued or running, or finished with its output not yet stepped out (a
        prefilled request whose first token ended it)."""
        return request_id in self.requests or any(out.request_id == request_id for out in self._ready)

    def has_unfinished(self) -> bool:
        return self.scheduler.has_unfinished()

    def _append(
        self, req: Request, token: int, logits: torch.Tensor, t_forward: float, t: float
    ) -> StepOutput:
        delta = req.accept(token, token in self.source.eos_ids, logits, t_forward, t)
        counts = {"prompt_tokens": req.seq.num_prompt, "cached_tokens": req.cached_tokens}
        if req.finish_reason is None:
            return StepOutput(req.id, token, delta, False, **counts)
        self.scheduler.finish(req)
        del self.requests[req.id]
        context = self.prompts.divergence_context(req.seq.token_ids[: req.seq.num_prompt], req.cached_tokens)
        return StepOutput(req.id, token, delta, True, req.generation(context), **counts)

    def _fail(self, req: Request, error: Exception) -> StepOutput:
        """Abort a request that failed alone (its forward or its logits); the output that reports it."""
        req.finish_reason, req.error = "error", error
        self.scheduler.finish(req)
        self.requests.pop(req.id, None)
        counts = {"prompt_tokens": req.seq.num_prompt, "cached_tokens": req.cached_tokens}
        return StepOutput(req.id, -1, "", True, None, error=error, **counts)

    def _text(self, ids: list[int]) -> str:
        return self.prompts.text(ids)

    def cache_stats(self) -> dict[str, int]:
        """The block manager's counts and split of blocks, and the requests preempted so far."""
        return super().cache_stats() | {"preemptions": self.scheduler.preemptions}

    @serialized
    def cache_index(self) -> list[tuple[bytes, bytes | None, tuple[int, ...]]]:
        """Every block the prefix cache can serve now: (hash, parent hash or None for a chain's first block,
        token ids)."""
        return self.blocks.index()

    @serialized
    def reset_cache(self) -> None:
        """Forget every cached block (stats are kept). Only on an idle engine."""
        if self.has_unfinished():
            raise InvalidArgumentError("reset_cache() needs an idle engine: requests still hold blocks")
        self.blocks.reset()
