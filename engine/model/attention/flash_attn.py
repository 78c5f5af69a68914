"""The flash-attn backend (CUDA, an optional extra: `pip install flash-attn`): flash-attn's varlen kernel
reads every sequence's K/V through its block table (`block_table`, the pool's `[blocks, block_size, kv_heads,
head_dim]` layout per layer), one call per layer for the whole step; its causal mask is aligned to the end of
each sequence's keys (query i of a chunk after `start` keys sees positions [0, start + i]). Its paged kernel
takes blocks of a multiple of 256 tokens only (load(..., block_size=256)). Checked on a GPU by
scripts/device_check.sh cuda and scripts/kernel_check.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate

import flash_attn
import torch
from flash_attn import flash_attn_varlen_func

from engine.devices import to_device
from engine.kv.decode_buffers import DecodeBuffers
from engine.kv.pool import KVCache
from engine.kv.slots import padded
from engine.kv.step import SeqSpan


class FlashAttnBackend:
    name = "flash-attn"

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.description = (
            f"flash-attn {flash_attn.__version__}: varlen kernel over the block tables, one call per layer"
        )

    def plan(self, spans: Sequence[SeqSpan], kv: KVCache) -> FlashAttnPlan:
        return FlashAttnPlan(spans, kv, self.device)

    def static_decode(self, buffers: DecodeBuffers, kv: KVCache, num_heads: int) -> None:
        return None  # decode steps stay eager (the varlen kernel is planned from host lengths)


class FlashAttnPlan:
    def __init__(self, spans: Sequence[SeqSpan], kv: KVCache, device: torch.device) -> None:
        bs, ends = kv.block_size, [s.start + s.length for s in spans]
        tables = padded([s.block_table[: -(-e // bs)] for s, e in zip(spans, ends, strict=True)])
        self.kv = kv
        self.cu_q = to_device([0, *accumulate(s.length for s in spans)], torch.int32, device)
        self.cu_k = to_device([0, *accumulate(ends)], torch.int32, device)
        self.max_q, self.max_k = max(s.length for s in spans), max(ends)
        self.block_table = to_device(tables, torch.int32, device)

    def forward(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return flash_attn_varlen_func(
            q.contiguous(),
            self.kv.k[layer],
            self.kv.v[layer],
            self.cu_q,
            self.cu_k,
            self.max_q,
            self.max_k,
            causal=True,
            block_table=self.block_table,
        )
