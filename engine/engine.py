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

from engine.attention import MAX_BYTES, AttentionMaps, capture
from engine.block_manager import BlockManager
from engine.chat import Message
from engine.devices import dtype_name, now
from engine.errors import PromptError
from engine.identity import identity
from engine.kv_cache import KVCache, SequenceKV, StepContext
from engine.model import Decoder
from engine.outputs import Generation, Timing, Usage
from engine.prompts import Prompt, PromptEncoder
from engine.regions import RenderedPrompt
from engine.sampling import sample
from engine.sequence import Sequence as Seq
from engine.sources import ModelSource


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
        num_blocks = KVCache.pool_blocks(self.config, block_size, dtype, device, cache_tokens, cache_gb)
        namespace = f"{source.digest}:{dtype_name(dtype)}".encode()
        self.blocks = BlockManager(num_blocks, block_size, namespace)
        self.kv = KVCache(self.config, num_blocks, block_size, dtype, device)

    # ---- identity and prompts (see engine.identity, engine.prompts) ---------------------------------
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
        return self.model(self._tensor(ids), StepContext(), logits_rows=slice(None))

    def _tensor(self, ids: Sequence[int]) -> torch.Tensor:
        return torch.tensor(ids, dtype=torch.long, device=self.device)

    def _forward(self, seq: Seq, start: int, end: int, window: SequenceKV | None) -> torch.Tensor:
        """Compute positions [start, end) of `seq`, writing their K/V; logits of the last one [vocab].
        Attention reads the context from `window` (which gains the new rows), or, without one, gathers it
        from the pool."""
        self.blocks.grow(seq, end)
        for s in range(start, end, self.prefill_chunk):
            e = min(s + self.prefill_chunk, end)
            ctx = StepContext(
                start=s,
                kv=self.kv,
                write_slots=self.kv.slots(seq.block_table, s, e),
                read_slots=self.kv.slots(seq.block_table, 0, e) if s > 0 and window is None else None,
                window=window,
            )
            logits = self.model(self._tensor(seq.token_ids[s:e]), ctx)
        seq.num_kv = end
        return logits[0]

    # ---- generation --------------------------------------------------------------------------------
    def generate(
        self,
        prompt: Prompt,
        max_new_tokens: int = 64,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        stop: Sequence[str] | None = None,
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
        ids = self.prompt_ids(prompt)
        if max_new_tokens < 1:
            raise PromptError(f"max_new_tokens must be at least 1, got {max_new_tokens}")
        self.check_context(len(ids), max_new_tokens)
        use_cache = self.cache_enabled if cache is None else cache and self.cache_enabled
        gen = torch.Generator().manual_seed(seed) if seed is not None else None
        seq = Seq(list(ids), salt=cache_salt)
        kept: list[torch.Tensor] | None = [] if return_logits else None

        def pick(logits: torch.Tensor) -> int:  # sample the next token, keeping its logits if asked
            if kept is not None:
                kept.append(logits.cpu())
            return sample(logits, temperature, top_p, gen)

        t0 = now(self.device)
        self.blocks.admit(seq, len(ids) + max_new_tokens, use_cache)
        t_lookup = now(self.device)
        try:
            window = self._window(seq, len(ids) + max_new_tokens)
            logits = self._forward(seq, seq.num_kv, len(ids), window)
            t_prefill = now(self.device)
            token = pick(logits)
            t_first = now(self.device)
            if use_cache:
                self.blocks.publish(seq)
            finish = self._decode(seq, window, token, max_new_tokens, pick, stop, on_token, use_cache)
            t_end = now(self.device)
        finally:
            self.blocks.release(seq)

        text = self.prompts.text(seq.generated)
        hit_stop = next((s for s in stop or () if s in text), None)
        text = text[: text.index(hit_stop)] if hit_stop else text
        n_out = len(seq.generated)
        cached, context = seq.num_cached, self.prompts.divergence_context(ids, seq.num_cached)
        usage = Usage(len(ids), cached, len(ids) - cached, n_out, cached, context)
        decode_s = t_end - t_first
        rate = (n_out - 1) / decode_s if n_out > 1 and decode_s > 0 else 0.0
        timing = Timing(t_first - t0, t_lookup - t0, t_prefill - t_lookup, decode_s, rate)
        out_logits = torch.stack(kept) if kept is not None else None
        return Generation(seq.generated, text, usage, timing, list(ids), finish, out_logits)

    def _decode(
        self,
        seq: Seq,
        window: SequenceKV | None,
        token: int,
        max_new: int,
        pick: Callable[[torch.Tensor], int],
        stop: Sequence[str] | None,
        on_token: Callable[[str], None] | None,
        use_cache: bool,
    ) -> str:
        """Append sampled tokens until EOS, a stop string or max_new; return the finish reason."""
        shown = ""
        while True:
            seq.token_ids.append(token)
            if token in self.source.eos_ids:
                return "stop"
            if on_token is not None or stop:
                text = self.prompts.text(seq.generated)
                if on_token is not None and not text.endswith("\ufffd"):  # wait for whole UTF-8 characters
                    on_token(text[len(shown) :])
                    shown = text
                if stop and any(s in text for s in stop):
                    return "stop"
            if len(seq.generated) >= max_new:
                return "length"
            logits = self._forward(seq, seq.num_kv, seq.num_kv + 1, window)
            if use_cache:
                self.blocks.publish(seq)
            token = pick(logits)

    def _window(self, seq: Seq, capacity: int) -> SequenceKV | None:
        """The sequence's attention context for prefill and decode, holding its cached prefix (one gather);
        None where device memory cannot hold the copy, and then every step after the first gathers its
        context from the pool instead (same numbers, more traffic)."""
        try:
            return SequenceKV.from_blocks(self.kv, seq.block_table, seq.num_kv, capacity)
        except torch.OutOfMemoryError:
            return None

    # ---- attention (computed by engine.attention from this engine's model) ----------------------------
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
    def reset_cache(self) -> None:
        """Forget every cached block (stats are kept)."""
        self.blocks.reset()

    def cache_stats(self) -> dict[str, int]:
        return self.blocks.usage()
