"""The torch backend's static decode step (`DecodeBuffers`): every shape fixed by the bucket, every index
computed on the device from the buffers, so that a CUDA graph can capture it.

At the first layer the keys [0, width x block_size) of every row are mapped to pool slots through its table
(positions past the row's length clamped to its last one, a written slot) and masked past its length; each
layer gathers them and runs one masked call (CPU flash, which broadcasts KV heads; elsewhere the query heads
of a KV head folded into its rows, the mask broadcast over them).
"""

from __future__ import annotations

import torch

from engine.kv.decode_buffers import DecodeBuffers
from engine.kv.pool import KVCache
from engine.model.attention.sdpa import attend


class TorchDecode:
    def __init__(self, buffers: DecodeBuffers, kv: KVCache, native_gqa: bool) -> None:
        self.b, self.kv, self.native_gqa = buffers, kv, native_gqa
        self.keys = torch.arange(buffers.width * kv.block_size, device=kv.k.device)
        self.flat = self.mask = None

    def forward(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        size, heads, d = q.shape
        if layer == 0:
            self._index(heads // self.kv.k.shape[-2])
        assert self.flat is not None
        kvh, length = self.kv.k.shape[-2], self.keys.numel()
        keys, values = (
            pool[layer].index_select(0, self.flat).view(size, length, kvh, d).transpose(1, 2)
            for pool in (self.kv.k_slots, self.kv.v_slots)
        )
        return attend(q[:, :, None], keys, values, self.mask, False, self.native_gqa)[0][:, :, 0]

    def _index(self, group: int) -> None:
        """The step's slots and mask, from the buffers (device work only)."""
        bs, last = self.kv.block_size, (self.b.lengths - 1)[:, None]
        pos = torch.minimum(self.keys[None, :], last)
        self.flat = (self.b.tables.gather(1, pos // bs) * bs + pos % bs).view(-1)
        hidden = (self.keys[None, :] > last)[:, None, None]  # [size, 1, 1, keys]
        mask = torch.zeros(hidden.shape, dtype=self.kv.k.dtype, device=hidden.device).masked_fill_(
            hidden, float("-inf")
        )
        self.mask = mask if self.native_gqa else mask.expand(-1, -1, group, -1)  # one query row per head
