"""The FlashInfer backend (CUDA, an optional extra: `pip install flashinfer-python`): FlashInfer's paged
prefill kernel reads every sequence's K/V through its block table in the pool's own layout (NHD: `[blocks,
block_size, kv_heads, head_dim]` per layer), one call per layer for the whole step, decode rows (one query
each) and prefill chunks alike; its causal mask is aligned to the end of each sequence's keys, so query i of
a chunk after `start` keys sees positions [0, start + i]. The step is planned once (`plan` on the host's
page counts) and run per layer. A static decode step (`FlashInferDecode`, what a CUDA graph captures) runs
FlashInfer's decode wrapper over fixed index buffers, planned once per step outside the captured region. Checked on a GPU by scripts/device_check.sh cuda and scripts/kernel_check.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate

import flashinfer
import torch

from engine.kv.decode_buffers import DecodeBuffers
from engine.kv.pool import KVCache
from engine.kv.step import SeqSpan

WORKSPACE_BYTES = 128 * 2**20  # FlashInfer's scratch space, as its examples allocate


class FlashInferBackend:
    name = "flashinfer"

    def __init__(self, device: torch.device) -> None:
        self.workspace = torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device=device)
        self.wrapper = flashinfer.BatchPrefillWithPagedKVCacheWrapper(self.workspace, "NHD")
        self.description = (
            f"FlashInfer {getattr(flashinfer, '__version__', '?')}: paged prefill kernel, one call per layer "
            "over the block tables"
        )

    def plan(self, spans: Sequence[SeqSpan], kv: KVCache) -> FlashInferPlan:
        return FlashInferPlan(self.wrapper, spans, kv)

    def static_decode(self, buffers: DecodeBuffers, kv: KVCache, num_heads: int) -> FlashInferDecode:
        return FlashInferDecode(self.workspace, buffers, kv, num_heads)


class FlashInferPlan:
    def __init__(
        self, wrapper: flashinfer.BatchPrefillWithPagedKVCacheWrapper, spans: Sequence[SeqSpan], kv: KVCache
    ):
        self.wrapper, self.spans, self.kv, self.planned = wrapper, spans, kv, False

    def _plan(self, num_heads: int) -> None:
        """The wrapper's plan for this step (host arrays; FlashInfer copies what its kernel reads)."""
        bs, kvh, d = self.kv.block_size, self.kv.k.shape[-2], self.kv.k.shape[-1]
        ends = [s.start + s.length for s in self.spans]
        pages = [-(-e // bs) for e in ends]
        int32 = dict(dtype=torch.int32)
        qo_indptr = torch.tensor([0, *accumulate(s.length for s in self.spans)], **int32)
        kv_indptr = torch.tensor([0, *accumulate(pages)], **int32)
        indices = torch.tensor(
            [b for s, n in zip(self.spans, pages, strict=True) for b in s.block_table[:n]], **int32
        )
        last = torch.tensor([e - (n - 1) * bs for e, n in zip(ends, pages, strict=True)], **int32)
        self.wrapper.plan(
            qo_indptr,
            kv_indptr,
            indices.to(self.kv.k.device),
            last,
            num_heads,
            kvh,
            d,
            bs,
            causal=True,
            q_data_type=self.kv.k.dtype,
            kv_data_type=self.kv.k.dtype,
        )
        self.planned = True

    def forward(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        if not self.planned:  # at the first layer, where the query heads are known
            self._plan(q.shape[1])
        return self.wrapper.run(q.contiguous(), (self.kv.k[layer], self.kv.v[layer]))


class FlashInferDecode:
    """A static decode step's attention (`DecodeBuffers`, what a CUDA graph captures): FlashInfer's decode
    wrapper over index buffers of the bucket's size (`use_cuda_graph=True`), planned once per step from the
    pinned host staging (`plan`, outside the captured region), run per layer. The workspace is the
    backend's, shared by every bucket (each step plans its own before it runs, as vLLM's graphs do)."""

    def __init__(self, workspace: torch.Tensor, buffers: DecodeBuffers, kv: KVCache, num_heads: int) -> None:
        int32 = dict(dtype=torch.int32, device=kv.k.device)
        self.indptr = torch.zeros(buffers.size + 1, **int32)
        self.indices = torch.zeros(buffers.size * buffers.width, **int32)
        self.last = torch.zeros(buffers.size, **int32)
        self.wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(
            workspace,
            "NHD",
            use_cuda_graph=True,
            paged_kv_indptr_buffer=self.indptr,
            paged_kv_indices_buffer=self.indices,
            paged_kv_last_page_len_buffer=self.last,
        )
        self.b, self.kv, self.heads = buffers, kv, num_heads

    def plan(self) -> None:
        bs, lengths = self.kv.block_size, self.b.host_meta[3]
        pages = (lengths + bs - 1) // bs
        indptr = torch.zeros(self.b.size + 1, dtype=torch.int32)
        indptr[1:] = pages.cumsum(0)
        used = torch.arange(self.b.width)[None, :] < pages[:, None]
        indices = self.b.host_tables[used].to(self.kv.k.device, torch.int32)
        self.wrapper.plan(
            indptr,
            indices,
            (lengths - (pages - 1) * bs).int(),
            self.heads,
            self.kv.k.shape[-2],
            self.kv.k.shape[-1],
            bs,
            q_data_type=self.kv.k.dtype,
            kv_data_type=self.kv.k.dtype,
        )

    def forward(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return self.wrapper.run(q.contiguous(), (self.kv.k[layer], self.kv.v[layer]))
