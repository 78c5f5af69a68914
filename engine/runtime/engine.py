"""`Engine`: prefill with prefix-cache reuse, then decode, for one request at a time.

A request: look up the longest cached block prefix of the prompt, compute only the rest at its true
positions (attending to the cached K/V), publish the newly filled blocks, then decode token by token,
publishing each block as it fills, so the next turn of a conversation reuses the answer too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from transformers import PreTrainedTokenizerBase

from engine.arguments import boolean, integer, stop_strings, string
from engine.devices import allocation_failed, dtype_name, now
from engine.errors import InvalidArgumentError
from engine.inspect.attention import MAX_BYTES, AttentionMaps, capture
from engine.kv.block_manager import BlockManager
from engine.kv.pool import KVCache
from engine.kv.sequence import SequenceState
from engine.kv.step import StepContext
from engine.kv.window import KVWindow
from engine.loading.sources import ModelSource
from engine.model.decoder import Decoder
from engine.model.sampling import check_sampling, sample
from engine.prompts.chat import Message
from engine.prompts.encoder import Prompt, PromptEncoder
from engine.prompts.regions import RenderedPrompt
from engine.runtime.identity import identity
from engine.runtime.outputs import Generation, Timing, Usage
from engine.runtime.runner import ModelRunner, PagedTarget


class Engine:
    def __init__(
        self,
        source: ModelSource,
        model: Decoder,
        tokenizer: PreTrainedTokenizerBase | None,
        device: torch.device,
        dtype: torch.dtype,
        *,
        block_size: int = 16,
        cache_tokens: int | None = None,
        cache_gb: float | None = None,
        cache: bool = True,
        prefill_chunk: int = 4096,
    ) -> None:
        self.source, self.model, self.config = source, model, source.config
        self.prompts = PromptEncoder(tokenizer, source.model_id, source.config)
        self.device, self.dtype = device, dtype
        self.cache_enabled = cache
        self.prefill_chunk = prefill_chunk
        num_blocks = KVCache.blocks_for_budget(
            self.config, block_size, dtype, device, tokens=cache_tokens, gb=cache_gb
        )
        namespace = f"{source.digest}:{dtype_name(dtype)}".encode()
        self.blocks = BlockManager(num_blocks, block_size, namespace)
        self.kv = KVCache(self.config, num_blocks, block_size, dtype, device)
        self.runner = ModelRunner(model, device, prefill_chunk, source.eos_ids)

    # ---- identity and prompts (see runtime/identity.py, prompts/encoder.py) ----------------------------
    @property
    def info(self) -> dict[str, Any]:
        """What every result records about the model and machine it came from."""
        cache_tokens = self.blocks.num_blocks * self.blocks.block_size
        return identity(self.source, self.dtype, self.device, self.blocks.block_size, cache_tokens)

    @property
    def tokenizer(self) -> PreTrainedTokenizerBase:
        return self.prompts.tokenizer

    def render(
        self, messages: Sequence[Message], tools: Sequence[dict] | None = None, **template_options: Any
    ) -> list[int]:
        """Token ids of messages rendered with the model's chat template, ending in the generation prompt."""
        return self.prompts.render(messages, tools, **template_options)

    def prompt_ids(self, prompt: Prompt) -> list[int]:
        """A string is encoded as raw text; a list of dicts is chat; a list of ints is used as is."""
        return self.prompts.ids(prompt)

    def check_context(self, prompt_len: int, max_new_tokens: int) -> None:
        """Refuse (never truncate) a request that does not fit the model's context."""
        self.prompts.check_context(prompt_len, max_new_tokens)

    # ---- forward passes ---------------------------------------------------------------------------
    def logits(self, token_ids: Sequence[int]) -> torch.Tensor:
        """float32 [len, vocab] from a plain causal forward with no cache: the reference path."""
        ids = self.prompt_ids(list(token_ids))
        self.check_context(len(ids), 0)
        tensor = torch.tensor(ids, dtype=torch.long, device=self.device)
        return self.model(tensor, StepContext(), logits_rows=slice(None))

    # ---- generation --------------------------------------------------------------------------------
    def generate(
        self,
        prompt: Prompt,
        max_new_tokens: int = 64,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        stop: str | Sequence[str] | None = None,
        on_token: Callable[[str], None] | None = None,
        *,
        cache: bool | None = None,
        cache_salt: str = "",
        return_logits: bool = False,
    ) -> Generation:
        """Prefill (reusing cached blocks unless cache=False) and decode up to max_new_tokens.

        `cache_salt` isolates tenants: blocks hashed under one salt never serve another.
        `return_logits` keeps the float32 logits of every sampling step in `Generation.logits`.
        """
        temperature, top_p = check_sampling(temperature, top_p)
        max_new_tokens = integer("max_new_tokens", max_new_tokens, minimum=1)
        seed = None if seed is None else integer("seed", seed, minimum=0)
        stop = stop_strings(stop)
        cache = None if cache is None else boolean("cache", cache)
        cache_salt, return_logits = string("cache_salt", cache_salt), boolean("return_logits", return_logits)
        if on_token is not None and not callable(on_token):
            raise InvalidArgumentError(f"on_token must be a function of the new text, got {on_token!r:.60}")
        encoded = self.prompts.encode(prompt)
        ids = encoded.ids
        self.check_context(len(ids), max_new_tokens)
        use_cache = self.cache_enabled if cache is None else cache and self.cache_enabled
        gen = torch.Generator().manual_seed(seed) if seed is not None else None
        seq = SequenceState(list(ids), salt=cache_salt)
        kept: list[torch.Tensor] | None = [] if return_logits else None

        def pick(logits: torch.Tensor) -> int:  # sample the next token, keeping its logits if asked
            if kept is not None:
                kept.append(logits.cpu())
            return sample(logits, temperature, top_p, gen)

        t0 = now(self.device)
        self.blocks.admit(seq, len(ids) + max_new_tokens, use_cache)
        t_lookup = now(self.device)
        try:
            target = PagedTarget(self.blocks, self.kv, seq, self._window(seq, len(ids) + max_new_tokens))
            logits = self.runner.forward(seq.token_ids, seq.num_kv, len(ids), target)
            t_prefill = now(self.device)
            token = pick(logits)
            t_first = now(self.device)
            publish = (lambda: self.blocks.publish(seq)) if use_cache else None
            if publish is not None:
                publish()
            stops = self._stopping(seq, stop, on_token)
            finish = self.runner.decode(seq.token_ids, target, token, max_new_tokens, pick, stops, publish)
            t_end = now(self.device)
        finally:
            self.blocks.release(seq)

        text = self.prompts.text(seq.generated)
        text = text[: min((text.index(s) for s in stop if s in text), default=len(text))]  # the earliest stop
        n_out = len(seq.generated)
        cached, context = seq.num_cached, self.prompts.divergence_context(ids, seq.num_cached)
        usage = Usage(len(ids), cached, len(ids) - cached, n_out, cached, context)
        decode_s = t_end - t_first
        rate = (n_out - 1) / decode_s if n_out > 1 and decode_s > 0 else 0.0
        timing = Timing(
            t_first - t0,
            t_lookup - t0,
            t_prefill - t_lookup,
            decode_s,
            rate,
            encoded.render_s,
            encoded.tokenize_s,
        )
        out_logits = torch.stack(kept) if kept is not None else None
        return Generation(seq.generated, text, usage, timing, list(ids), finish, out_logits)

    def _stopping(
        self, seq: SequenceState, stop: Sequence[str], on_token: Callable[[str], None] | None
    ) -> Callable[[int], bool] | None:
        """The decode loop's text check: stream whole characters to `on_token` and stop at a stop string."""
        if on_token is None and not stop:
            return None
        shown = ""

        def check(_generated: int) -> bool:
            nonlocal shown
            text = self.prompts.text(seq.generated)
            if on_token is not None and not text.endswith("\ufffd"):  # wait for whole UTF-8 characters
                on_token(text[len(shown) :])
                shown = text
            return bool(stop) and any(s in text for s in stop)

        return check

    def _window(self, seq: SequenceState, capacity: int) -> KVWindow | None:
        """The sequence's attention context for prefill and decode, holding its cached prefix (one gather);
        None where memory cannot hold the copy (on any device), and then every step after the first gathers
        its context from the pool instead (same numbers, more traffic)."""
        try:
            return KVWindow.from_blocks(self.kv, seq.block_table, seq.num_kv, capacity)
        except RuntimeError as e:  # torch.OutOfMemoryError on a GPU, the allocator's RuntimeError on a CPU
            if not allocation_failed(e):
                raise
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
        rendered = self.prompts.rendered(prompt)
        if max_new_tokens > 0:
            rendered = self.continue_greedily(rendered, max_new_tokens)
        return capture(self.model, self.prompts, rendered, layers, heads, rows, max_bytes)

    def continue_greedily(self, prompt: RenderedPrompt, max_new_tokens: int) -> RenderedPrompt:
        """The prompt followed by its greedy continuation (EOS included), as a "generated" region."""
        gen = self.generate(prompt.token_ids, max_new_tokens=max_new_tokens, cache=False)
        return prompt.with_generated(gen.token_ids)

    # ---- cache control -------------------------------------------------------------------------------
    def with_own_pool(self, cache_tokens: int) -> Engine:
        """An engine over the same weights and tokenizer with its own KV pool of `cache_tokens` tokens: what
        it runs (e.g. cold baselines) can never evict a block of this engine's cache."""
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
        )

    def reset_cache(self) -> None:
        """Forget every cached block (stats are kept)."""
        self.blocks.reset()

    def cache_stats(self) -> dict[str, int]:
        return self.blocks.usage()
