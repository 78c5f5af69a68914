"""`KVWindow`: a private contiguous K/V context, outside the pool, for the approximate experiments."""

from __future__ import annotations

import torch

from engine.kv.pool import KVCache


class KVWindow:
    """One sequence's attention context for the opt-in approximate experiments (engine/approx): K/V contiguous
    per layer and KV head, `[layers, kv_heads, capacity, head_dim]`, outside the pool, where an assembly
    writes relocated, spliced or stale rows (`write`) before a forward extends or scatters into it. The
    exact paths never use one: they read the pool through block tables (engine/model/attention).

    Rows [0, start) are the context a forward with new tokens at positions start.. attends to; it writes its
    own rows [start, start + T) (`extend`). `from_blocks` copies pool blocks out (an exact snapshot).
    """

    def __init__(
        self,
        num_layers: int,
        num_kv_heads: int,
        head_dim: int,
        capacity: int,
        dtype: torch.dtype,
        device: torch.device,
    ) -> None:
        # torch.empty: rows are written (by from_blocks, write or extend) before any step reads them.
        self.k = torch.empty((num_layers, num_kv_heads, capacity, head_dim), dtype=dtype, device=device)
        self.v = torch.empty_like(self.k)

    @classmethod
    def like(cls, kv: KVCache, capacity: int) -> KVWindow:
        """An empty window shaped and typed like the pool's K/V."""
        layers, kvh, d = kv.k.shape[0], kv.k.shape[-2], kv.k.shape[-1]
        return cls(layers, kvh, d, capacity, kv.k.dtype, kv.k.device)

    @classmethod
    def from_blocks(cls, kv: KVCache, block_table: list[int], length: int, capacity: int) -> KVWindow:
        """A window whose rows [0, length) are the pool's K/V of positions [0, length): one gather per layer."""
        window = cls.like(kv, capacity)
        if length:
            slots = kv.slots(block_table, 0, length)
            for layer in range(window.k.shape[0]):
                window.write(layer, 0, *kv.read(layer, slots))
        return window

    def copy_into(self, kv: KVCache, block_table: list[int], length: int) -> None:
        """Rows [0, length) into the pool's blocks of `block_table` (positions [0, length)), every layer."""
        slots = kv.slots(block_table, 0, length)
        for layer in range(self.k.shape[0]):
            kv.write(
                layer,
                slots,
                self.k[layer, :, :length].transpose(0, 1),
                self.v[layer, :, :length].transpose(0, 1),
            )

    @property
    def capacity(self) -> int:
        return self.k.shape[2]

    def write(self, layer: int, start: int, k: torch.Tensor, v: torch.Tensor) -> None:
        """Store k, v `[T, kv_heads, head_dim]` as rows [start, start + T) of one layer."""
        end = start + k.shape[0]
        self.k[layer, :, start:end], self.v[layer, :, start:end] = k.transpose(0, 1), v.transpose(0, 1)

    def extend(
        self, layer: int, start: int, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Store rows [start, start + T) of one layer; return its K, V `[kv_heads, start + T, head_dim]` (views)."""
        end = start + k.shape[0]
        self.write(layer, start, k, v)
        return self.k[layer, :, :end], self.v[layer, :, :end]

    def scatter(
        self, layer: int, positions: torch.Tensor, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Store k, v `[T, kv_heads, head_dim]` as the rows at `positions` (ascending) of one layer; return its
        K, V up to the last of them, `[kv_heads, positions[-1] + 1, head_dim]` (views)."""
        self.k[layer][:, positions], self.v[layer][:, positions] = k.transpose(0, 1), v.transpose(0, 1)
        end = int(positions[-1]) + 1
        return self.k[layer, :, :end], self.v[layer, :, :end]
