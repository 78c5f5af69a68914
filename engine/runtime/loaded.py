"""`LoadedModel`: a model ready to serve, everything but the request lifecycle (engine/runtime/engine.py):
its source, weights, tokenizer and prompt encoder, device and dtype, the KV pool, its block manager and the
attention backend that reads it;
what results record about it; its plain reference forward; and its prefix cache's state."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from transformers import PreTrainedTokenizerBase

from engine.devices import dtype_name
from engine.kv.block_manager import BlockManager
from engine.kv.pool import KVCache
from engine.kv.step import StepContext
from engine.loading.sources import ModelSource
from engine.model.attention import select as select_attention
from engine.model.decoder import Decoder
from engine.prompts.chat import Message
from engine.prompts.encoder import Prompt, PromptEncoder
from engine.runtime.identity import identity


class LoadedModel:
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
        attention: str = "auto",
    ) -> None:
        self.source, self.model, self.config = source, model, source.config
        self.prompts = PromptEncoder(tokenizer, source.model_id, source.config)
        self.device, self.dtype = device, dtype
        self.cache_enabled, self.prefill_chunk = cache, prefill_chunk
        num_blocks = KVCache.blocks_for_budget(
            self.config, block_size, dtype, device, tokens=cache_tokens, gb=cache_gb
        )
        self.blocks = BlockManager(num_blocks, block_size, f"{source.digest}:{dtype_name(dtype)}".encode())
        self.kv = KVCache(self.config, num_blocks, block_size, dtype, device)
        self.attention_backend = select_attention(attention, device, dtype, block_size)

    # ---- identity and prompts (see runtime/identity.py, prompts/encoder.py) ----------------------------
    @property
    def info(self) -> dict[str, Any]:
        """What every result records about the model and machine it came from."""
        cache_tokens = self.blocks.num_blocks * self.blocks.block_size
        return identity(self.source, self.dtype, self.device, self.blocks.block_size, cache_tokens) | {
            "attention": self.attention_backend.description
        }

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

    def logits(self, token_ids: Sequence[int]) -> torch.Tensor:
        """float32 [len, vocab] from a plain causal forward with no cache: the reference path."""
        ids = self.prompt_ids(list(token_ids))
        self.check_context(len(ids), 0)
        tensor = torch.tensor(ids, dtype=torch.long, device=self.device)
        return self.model(tensor, StepContext.plain(len(ids)), logits_rows=slice(None))

    def cache_stats(self) -> dict[str, int]:
        return self.blocks.usage()
