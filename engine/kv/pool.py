"""`KVCache`: the paged KV pool, fixed-size blocks in preallocated per-layer tensors.

The pool never grows: its block count is fixed at construction from a token or byte budget, by default
DEFAULT_CACHE_TOKENS on every device (never a share of the memory free at the moment, so one command sizes
the same cache on every run, with or without weights loaded, as `replay --analyze` relies on).
Which block holds which tokens is decided by `BlockManager`; this module only stores and reads.
"""

from __future__ import annotations

import torch

from engine.arguments import DEFAULT_CACHE_TOKENS, integer, real
from engine.devices import allocation_failed, free_memory
from engine.errors import CacheCapacityError, InvalidArgumentError
from engine.model.config import ModelConfig

__all__ = ["DEFAULT_CACHE_TOKENS", "KVCache"]


class KVCache:
    """K and V pools shaped `[num_layers, num_blocks, block_size, num_kv_heads, head_dim]`.

    A token at position p of a sequence lives in slot `block_table[p // block_size] * block_size + p % block_size`.
    """

    def __init__(
        self, config: ModelConfig, num_blocks: int, block_size: int, dtype: torch.dtype, device: torch.device
    ) -> None:
        shape = (config.num_layers, num_blocks, block_size, config.num_kv_heads, config.head_dim)
        # torch.empty: untouched pages cost no host memory; every slot is written before it is read.
        try:
            self.k = torch.empty(shape, dtype=dtype, device=device)
            self.v = torch.empty(shape, dtype=dtype, device=device)
        except RuntimeError as e:  # torch.OutOfMemoryError on a GPU, the allocator's RuntimeError on a CPU
            if not allocation_failed(e):
                raise
            tokens, size = num_blocks * block_size, 2 * torch.Size(shape).numel() * dtype.itemsize / 2**30
            raise CacheCapacityError(
                f"a KV cache of {tokens:,} tokens ({size:,.2f} GiB) could not be allocated on {device}; "
                "give a smaller cache_gb or cache_tokens"
            ) from None
        self.num_blocks = num_blocks
        self.block_size = block_size
        # Each layer's K and V as flat slot rows `[blocks x block_size, kv_heads, head_dim]` (views, made once)
        self.k_slots = [self.k[layer].view(-1, *shape[-2:]) for layer in range(shape[0])]
        self.v_slots = [self.v[layer].view(-1, *shape[-2:]) for layer in range(shape[0])]

    @staticmethod
    def blocks_for_budget(
        config: ModelConfig,
        block_size: object,
        dtype: torch.dtype,
        device: torch.device,
        *,
        tokens: object = None,
        gb: object = None,
    ) -> int:
        """How many blocks a budget of `tokens` or `gb` GiB buys (neither: DEFAULT_CACHE_TOKENS), checked to
        fit in the memory free on `device` before anything is allocated (an empty pool takes no pages until
        written, so an oversized one would fail only when it fills)."""
        block_size = integer("block_size", block_size, minimum=1)
        num_blocks = KVCache.blocks_in_budget(config, block_size, dtype, tokens=tokens, gb=gb)
        need = num_blocks * block_size * KVCache.bytes_per_token(config, dtype)
        free, where = free_memory(device)
        if need > free:
            raise CacheCapacityError(
                f"a KV cache of {num_blocks * block_size:,} tokens needs {need / 2**30:,.2f} GiB but "
                f"only {free / 2**30:,.2f} GiB of {where} is left; give a smaller cache_gb or cache_tokens"
            )
        return num_blocks

    @staticmethod
    def blocks_in_budget(
        config: ModelConfig,
        block_size: object,
        dtype: torch.dtype,
        *,
        tokens: object = None,
        gb: object = None,
    ) -> int:
        """Blocks a budget buys, sizes checked (positive, at least one block, not both given) but not the
        memory: for analyses that size a cache without allocating it."""
        block_size = integer("block_size", block_size, minimum=1)
        per_token = KVCache.bytes_per_token(config, dtype)
        if tokens is not None and gb is not None:
            raise InvalidArgumentError(
                f"cache_tokens ({tokens!r}) and cache_gb ({gb!r}) both size the KV cache: give one of them"
            )
        if tokens is not None:
            budget = integer("cache_tokens", tokens, minimum=1)
        elif gb is not None:
            budget = int(real("cache_gb", gb, positive=True) * 2**30) // per_token
        else:
            budget = DEFAULT_CACHE_TOKENS
        if budget // block_size < 1:
            raise CacheCapacityError(
                f"a KV cache of {budget} tokens holds no block of {block_size} tokens; give a larger cache"
            )
        return budget // block_size

    @staticmethod
    def bytes_per_token(config: ModelConfig, dtype: torch.dtype) -> int:
        return config.kv_bytes_per_token * torch.tensor([], dtype=dtype).element_size()

    @property
    def nbytes(self) -> int:
        return self.k.numel() * self.k.element_size() * 2

    def touch(self) -> None:
        """Write every page of the pool once (zeros): a timed comparison's arms then never pay a page's first
        touch (an untouched pool costs no memory, and its first writes fault pages in)."""
        self.k.zero_()
        self.v.zero_()

    def slots(self, block_table: list[int], start: int, end: int) -> torch.Tensor:
        """Flat slot indices for positions [start, end) of a sequence with this block table."""
        bs = self.block_size
        if end - start == 1:  # a decode step: one slot, without building the whole table
            return torch.tensor([block_table[start // bs] * bs + start % bs], device=self.k.device)
        table = torch.tensor(block_table, dtype=torch.long)
        pos = torch.arange(start, end, dtype=torch.long)
        return (table[pos // bs] * bs + pos % bs).to(self.k.device)

    def write(self, layer: int, slots: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """Store k, v `[T, kv_heads, head_dim]` at the given slots of one layer."""
        self.k_slots[layer].index_copy_(0, slots, k)
        self.v_slots[layer].index_copy_(0, slots, v)

    def read(self, layer: int, slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Gather K, V `[len(slots), kv_heads, head_dim]` of one layer."""
        return self.k_slots[layer].index_select(0, slots), self.v_slots[layer].index_select(0, slots)
