"""`Engine`: requests in, tokens out, over one model and one prefix-cached KV pool.

A request is added (`add_request`), then every `step` runs one batch the scheduler builds (decode tokens of
running requests and prompt chunks of new ones, see engine/runtime/scheduler.py): each request's cached
block prefix is looked up at admission and only the rest computed, at its true positions; full blocks are
published as they fill, so the next turn of a conversation, or another request in flight, reuses them.
`generate` is a batch of one; `generate_many` runs several to the end.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import torch

from engine.arguments import boolean, integer, string
from engine.devices import allocation_failed, now
from engine.errors import CacheCapacityError, InvalidArgumentError
from engine.inspect.attention import MAX_BYTES, AttentionMaps, capture
from engine.kv.sequence import SequenceState
from engine.kv.window import KVWindow
from engine.model.sampling import sample_rows
from engine.prompts.encoder import Prompt
from engine.prompts.regions import RenderedPrompt
from engine.runtime.loaded import LoadedModel
from engine.runtime.outputs import Generation, StepOutput
from engine.runtime.request import Request, SamplingParams
from engine.runtime.runner import ModelRunner
from engine.runtime.scheduler import Scheduler


class Engine(LoadedModel):
    """The request lifecycle over a `LoadedModel` (its weights, tokenizer, KV pool and block manager)."""

    def __init__(self, *args: Any, max_num_seqs: int = 64, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.max_num_seqs = max_num_seqs
        self.runner = ModelRunner(self.model, self.kv, self.device)
        # prefill_chunk is the step's token budget: a longer prompt is prefilled over several steps
        self.scheduler = Scheduler(self.blocks, max_num_seqs, self.prefill_chunk)
        self.requests: dict[str, Request] = {}
        self._ids = itertools.count()
        self._ready: list[StepOutput] = []
        # Called from `step` with (request id, cached tokens) when a request is first admitted (its prefix
        # looked up), before that step's forward: a server opens the request's stream then.
        self.on_admitted: Callable[[str, int], None] | None = None

    # ---- requests ------------------------------------------------------------------------------------
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
    ) -> str:
        """Queue a request; its id. Checked here: arguments, the model's context, and that the pool could
        ever hold it (a request that fits waits, or preempts, for room). `cache=False` (or an engine loaded
        with cache=False) keeps its K/V in its own window: no lookup, nothing published, nothing evicted.
        `cache_salt` isolates tenants: blocks hashed under one salt never serve another. `ignore_eos` decodes
        exactly max_new_tokens tokens (for benchmarks that fix output lengths)."""
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
        seq = SequenceState(list(encoded.ids), salt=string("cache_salt", cache_salt))
        req = Request(
            rid, seq, params, now(self.device), private, encoded.render_s, encoded.tokenize_s, generator
        )
        return self._enqueue(req)

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
        of engine/approx), with its last token's logits: its first token is their argmax now, and the step
        loop decodes the rest greedily in that window (logits of every step kept); it never reaches the pool."""
        params = SamplingParams.checked(max_new_tokens, 0.0, 1.0, None, None, True)
        seq = SequenceState(list(token_ids))
        seq.num_kv = len(seq)
        req = Request(f"req-{next(self._ids)}", seq, params, now(self.device), private=True, window=window)
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

    def step(self) -> list[StepOutput]:
        """Run one scheduled batch; one output per request that sampled a token in it."""
        ready, self._ready = self._ready, []
        if ready:  # first tokens of prefilled requests, sampled when they were added
            return ready
        t0 = now(self.device)
        scheduled = self.scheduler.schedule()
        t_lookup = now(self.device)
        for req in scheduled.admitted:
            if req.admitted is None:  # the first admission: what the prompt got from the cache
                req.admitted, req.lookup_s, req.cached_tokens = t0, t_lookup - t0, req.seq.num_cached
                if self.on_admitted is not None:
                    self.on_admitted(req.id, req.cached_tokens)
            req.window = req.window or self._window(req)
        if not scheduled.work:
            return []
        sampling, logits = self.runner.run(scheduled.work)
        t_forward = now(self.device)
        for req, _ in scheduled.work:
            if not req.private:
                self.blocks.publish(req.seq)
        params = [(r.params.temperature, r.params.top_p, r.generator) for r in sampling]
        tokens = sample_rows(logits, params)
        t_sampled = now(self.device)
        return [self._append(r, tokens[i], logits[i], t_forward, t_sampled) for i, r in enumerate(sampling)]

    def abort(self, request_id: str) -> bool:
        """Stop a request (its blocks released at once); False if no such request is in flight."""
        req = self.requests.pop(request_id, None)
        if req is not None:
            req.finish_reason = "abort"
            self.scheduler.finish(req)
        return req is not None

    def has_unfinished(self) -> bool:
        return self.scheduler.has_unfinished()

    def generate(
        self,
        prompt: Prompt,
        max_new_tokens: int = 64,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        stop: str | Sequence[str] | None = None,
        on_token: Callable[[str], None] | None = None,
        **options: Any,
    ) -> Generation:
        """One request on an idle engine, to its end (options: those of `add_request`). `on_token` receives
        the text as it comes (whole characters, never a stop string or what follows it)."""
        if on_token is not None and not callable(on_token):
            raise InvalidArgumentError(f"on_token must be a function of the new text, got {on_token!r:.60}")
        if self.has_unfinished():
            raise InvalidArgumentError("generate() needs an idle engine; drive several with add_request/step")
        rid = self.add_request(prompt, max_new_tokens, temperature, top_p, seed, stop, **options)
        return self.run_to_end(rid, on_token)

    def run_to_end(self, request_id: str, on_token: Callable[[str], None] | None = None) -> Generation:
        """Step until the request finishes (others in flight advance too; their outputs are dropped, so use
        it alone); aborted if an exception (or Ctrl-C) stops it first."""
        try:
            while True:
                for out in self.step():
                    if out.request_id != request_id:
                        continue
                    if on_token is not None and out.text:
                        on_token(out.text)
                    if out.generation is not None:
                        return out.generation
        finally:
            self.abort(request_id)  # a no-op once it has finished

    def generate_many(self, prompts: Sequence[Prompt], **options: Any) -> list[Generation]:
        """Several requests batched together on an idle engine, to their ends; in the order of `prompts`."""
        if self.has_unfinished():
            raise InvalidArgumentError("generate_many() needs an idle engine; use add_request/step")
        ids = [self.add_request(p, **options) for p in prompts]
        done: dict[str, Generation] = {}
        try:
            while len(done) < len(ids):
                done |= {o.request_id: o.generation for o in self.step() if o.generation is not None}
        finally:
            for rid in ids:
                self.abort(rid)
        return [done[rid] for rid in ids]

    def _append(
        self, req: Request, token: int, logits: torch.Tensor, t_forward: float, t: float
    ) -> StepOutput:
        text = self.prompts.text([*req.seq.generated, token])
        delta = req.accept(token, text, token in self.source.eos_ids, logits, t_forward, t)
        counts = {"prompt_tokens": req.seq.num_prompt, "cached_tokens": req.cached_tokens}
        if req.finish_reason is None:
            return StepOutput(req.id, token, delta, False, **counts)
        self.scheduler.finish(req)
        del self.requests[req.id]
        context = self.prompts.divergence_context(req.seq.token_ids[: req.seq.num_prompt], req.cached_tokens)
        return StepOutput(req.id, token, delta, True, req.generation(context), **counts)

    def _window(self, req: Request) -> KVWindow | None:
        """The request's attention context for its prefill and decode, holding its cached prefix (one
        gather). A pool-backed request whose copy does not fit in memory (on any device) gets None and
        gathers its context from the pool every step (same numbers, more traffic); a private one has nowhere
        else."""
        try:
            if req.private:
                return KVWindow.like(self.kv, req.capacity)
            return KVWindow.from_blocks(self.kv, req.seq.block_table, req.seq.num_kv, req.capacity)
        except RuntimeError as e:  # torch.OutOfMemoryError on a GPU, the allocator's RuntimeError on a CPU
            if not allocation_failed(e):
                raise
            if req.private:
                raise CacheCapacityError(f"no device memory for a {req.capacity}-token K/V window") from None
            return None

    # ---- attention (computed by engine.inspect.attention from this engine's model) ---------------
    def attention(
        self,
        prompt: Prompt | RenderedPrompt,
        layers: Sequence[int] | None = None,
        heads: Sequence[int] | None = None,
        rows: Sequence[int] | None = None,
        *,
        max_new_tokens: int = 0,
        max_bytes: int = MAX_BYTES,
    ) -> AttentionMaps:
        """Attention probabilities of the chosen layers, heads and query rows (None: all), from this
        engine's own queries and keys; `max_new_tokens` > 0 decodes greedily first and adds those rows."""
        max_new_tokens = integer("max_new_tokens", max_new_tokens, minimum=0)
        rendered = self.prompts.rendered(prompt)
        if max_new_tokens > 0:
            gen = self.generate(rendered.token_ids, max_new_tokens=max_new_tokens, cache=False)
            rendered = rendered.with_generated(gen.token_ids)
        return capture(self.model, self.prompts, rendered, layers, heads, rows, max_bytes)

    def with_own_pool(self, cache_tokens: int) -> Engine:
        """An engine over the same weights and tokenizer with its own KV pool of `cache_tokens` tokens: what
        it runs can never evict a block of this engine's cache."""
        return Engine(
            self.source,
            self.model,
            self.prompts.loaded_tokenizer,
            self.device,
            self.dtype,
            block_size=self.blocks.block_size,
            cache_tokens=cache_tokens,
            cache=self.cache_enabled,
            prefill_chunk=self.prefill_chunk,
            max_num_seqs=self.max_num_seqs,
        )

    def cache_stats(self) -> dict[str, int]:
        """The block manager's counts and split of blocks, and the requests preempted so far."""
        return super().cache_stats() | {"preemptions": self.scheduler.preemptions}

    def reset_cache(self) -> None:
        """Forget every cached block (stats are kept). Only on an idle engine."""
        if self.has_unfinished():
            raise InvalidArgumentError("reset_cache() needs an idle engine: requests still hold blocks")
        self.blocks.reset()
