"""`Engine`: requests in, tokens out. The request lifecycle (`add_request`, `step`, `abort`) is the
`EngineCore`'s (engine/runtime/core.py); here are the drivers that run requests to their ends
(`generate`: a batch of one; `generate_many`: several at once; `run_to_end`), attention maps of the
engine's own model, and an engine over the same weights with its own pool.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from engine.arguments import integer
from engine.errors import InvalidArgumentError
from engine.inspect.attention import MAX_BYTES, AttentionMaps, capture
from engine.prompts.encoder import Prompt
from engine.prompts.regions import RenderedPrompt
from engine.runtime.core import EngineCore, serialized
from engine.runtime.outputs import Generation


class Engine(EngineCore):
    """An `EngineCore` with the drivers users call."""

    @serialized
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

    @serialized
    def run_to_end(self, request_id: str, on_token: Callable[[str], None] | None = None) -> Generation:
        """Step until the request finishes (others in flight advance too; their outputs are dropped, so use
        it alone); aborted if an exception (or Ctrl-C) stops it first. A request that fails raises its
        error; an id that is not in flight is an InvalidArgumentError."""
        if not self.in_flight(request_id):
            raise InvalidArgumentError(f"no request {request_id!r:.80} is in flight")
        try:
            while True:
                for out in self.step():
                    if out.request_id != request_id:
                        continue
                    if out.error is not None:
                        raise out.error
                    if on_token is not None and out.text:
                        on_token(out.text)
                    if out.generation is not None:
                        return out.generation
        finally:
            self.abort(request_id)  # a no-op once it has finished

    @serialized
    def generate_many(self, prompts: Sequence[Prompt], **options: Any) -> list[Generation]:
        """Several requests batched together on an idle engine, to their ends; in the order of `prompts`.
        Every prompt is checked before any is queued; a request that fails raises its error (the others
        are aborted)."""
        if self.has_unfinished():
            raise InvalidArgumentError("generate_many() needs an idle engine; use add_request/step")
        if isinstance(prompts, str) or not isinstance(prompts, Sequence):
            raise InvalidArgumentError(f"prompts must be a list of prompts, got {type(prompts).__name__}")
        ids: list[str] = []
        done: dict[str, Generation] = {}
        try:
            for prompt in prompts:  # all checked before any runs: one refused, none is left queued
                ids.append(self.add_request(prompt, **options))
            while len(done) < len(ids):
                for out in self.step():
                    if out.error is not None:
                        raise out.error
                    if out.generation is not None:
                        done[out.request_id] = out.generation
        finally:
            for rid in ids:
                self.abort(rid)
        return [done[rid] for rid in ids]

    # ---- attention (computed by engine.inspect.attention from this engine's model) ---------------
    @serialized
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
            attention=self.attention_backend.name,
        )
