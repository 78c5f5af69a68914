"""`load()`: one model string -> a ready `Engine` (weights checked against the config, tokenizer if any)."""

from __future__ import annotations

from dataclasses import replace

from transformers import PreTrainedTokenizerBase

from engine.arguments import boolean, integer, random_seed, string
from engine.devices import resolve_device, resolve_dtype
from engine.errors import InvalidArgumentError
from engine.kv.pool import KVCache
from engine.loading.sources import ModelSource, resolve
from engine.loading.tokenizer import load_tokenizer
from engine.loading.weights import load_weights
from engine.model.attention import select as select_attention
from engine.model.decoder import Decoder
from engine.runtime.engine import Engine


def load(
    model: str,
    device: str | None = None,
    dtype: str | None = None,
    *,
    seed: int = 0,
    block_size: int = 16,
    cache_tokens: int | None = None,
    cache_gb: float | None = None,
    cache: bool = True,
    prefill_chunk: int = 4096,
    max_num_seqs: int = 64,
    attention: str = "auto",
) -> Engine:
    """Load `model` (folder, hub id, .gguf, alias or synthetic:<preset>) onto `device` in `dtype`.

    The KV cache holds `cache_tokens` tokens, else `cache_gb` GiB, else a share of free memory, in blocks of
    `block_size`; `cache=False` turns prefix reuse off. `seed` chooses synthetic weights. The scheduler runs at
    most `max_num_seqs` requests at once (the rest wait) in steps of at most `prefill_chunk` tokens.
    `attention` names the attention backend (auto: the best this device and installation offer, see
    engine/model/attention). Every argument is checked before any weight is read.
    """
    for name, value in (("model", model), ("device", device), ("dtype", dtype)):
        if value is not None and not isinstance(value, str):
            raise InvalidArgumentError(f"{name} must be a string, got {type(value).__name__} {value!r}")
    cache = boolean("cache", cache)
    seed, prefill_chunk = random_seed("seed", seed), integer("prefill_chunk", prefill_chunk, minimum=1)
    max_num_seqs = integer("max_num_seqs", max_num_seqs, minimum=1)
    dev = resolve_device(device)
    dt = resolve_dtype(dtype, dev)
    select_attention(string("attention", attention), dev, dt, block_size)  # fail early
    source = resolve(model, seed)
    KVCache.blocks_for_budget(
        source.config, block_size, dt, dev, tokens=cache_tokens, gb=cache_gb
    )  # fail early
    source, tokenizer = with_tokenizer(source)
    decoder = Decoder(source.config, dt, dev)
    load_weights(decoder, source.reader(dev))
    options = dict(block_size=block_size, cache_tokens=cache_tokens, cache_gb=cache_gb, cache=cache)
    batching = dict(prefill_chunk=prefill_chunk, max_num_seqs=max_num_seqs, attention=attention)
    return Engine(source, decoder, tokenizer, dev, dt, **batching, **options)


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
