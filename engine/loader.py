"""`load()`: one model string -> a ready `Engine` (weights checked against the config, tokenizer if any)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from transformers import PreTrainedTokenizerBase

from engine.devices import resolve_device, resolve_dtype
from engine.engine import Engine
from engine.model import Decoder
from engine.sources import ModelSource, resolve
from engine.tokenizer import load_tokenizer
from engine.weights import load_weights


def load(
    model: str, device: str | None = None, dtype: str | None = None, *, seed: int = 0, **options: Any
) -> Engine:
    """Load `model` (folder, hub id, .gguf, alias or synthetic:<preset>) onto `device` in `dtype`.

    Options go to `Engine`: block_size, cache_tokens, cache_gb, cache (False: no prefix reuse), prefill_chunk.
    `seed` chooses synthetic weights.
    """
    dev = resolve_device(device)
    dt = resolve_dtype(dtype, dev)
    source, tokenizer = with_tokenizer(resolve(model, seed))
    decoder = Decoder(source.config, dt, dev)
    load_weights(decoder, source.reader(dev))
    return Engine(source, decoder, tokenizer, dev, dt, **options)


def with_tokenizer(source: ModelSource) -> tuple[ModelSource, PreTrainedTokenizerBase | None]:
    """The model's tokenizer (None: it has none), and the source with the tokenizer's end-of-turn id among
    its `eos_ids`."""
    tokenizer = load_tokenizer(source.tokenizer_dir) if source.tokenizer_dir else None
    if (
        tokenizer is not None
        and tokenizer.eos_token_id is not None
        and tokenizer.eos_token_id not in source.eos_ids
    ):
        source = replace(source, eos_ids=(*source.eos_ids, tokenizer.eos_token_id))
    return source, tokenizer
