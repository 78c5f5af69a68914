"""The torch backend: paged attention from PyTorch's own kernels, on every device (the CPU's exact path; on
CUDA the fallback where no paged kernel library is installed).

Per step (`plan`), the decode rows (one new token each) come first in the step's rows, the prefill chunks
after them. Per layer (`forward`):
- every decode row at once: one gather of the batch's contexts from the pool into `[sequences, kv_heads,
  longest context, head_dim]` (an index the plan built once for all layers; padding masked) and one SDPA
  call, each KV head serving its group of query heads as rows;
- each prefill chunk (compute-bound: its call's cost is its work) reads its context in place: the runs of
  consecutive blocks of its block table are strided views of the pool, each one fused call returning its
  log-sum-exp, its own new keys one causal call, merged exactly (`parts_attention`); a table in more than
  MAX_RUNS runs is gathered into one part. MPS, where no kernel returns the log-sum-exp, gathers the context
  and runs one masked call. A chunk from position 0 is one causal call.
Nothing is kept between steps: the memory a request adds is transient, one layer's gather at most.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from engine.devices import to_device
from engine.kv.pool import KVCache
from engine.kv.slots import contiguous_runs, padded
from engine.kv.step import SeqSpan
from engine.model.causal_attention import causal_attention, parts_attention

MAX_RUNS = 8  # context runs read in place per prefill chunk; more: the context is gathered into one part


class TorchBackend:
    name = "torch"

    def __init__(self, device: torch.device) -> None:
        self.device = device
        in_place = device.type in ("cpu", "cuda")
        self.description = "torch SDPA: decode rows gathered into one batched call per layer; prefill " + (
            "reads the context in place (runs of blocks merged by log-sum-exp)" if in_place else "gathers"
        )

    def plan(self, spans: Sequence[SeqSpan], kv: KVCache) -> TorchPlan:
        """The step's attention plan; `spans` in row order, every decode span (length 1) first."""
        n = 0
        while n < len(spans) and spans[n].length == 1:
            n += 1
        assert all(s.length > 1 for s in spans[n:]), "decode spans come first"
        return TorchPlan(kv, self.device, _decode_index(spans[:n], kv, self.device), _prefills(spans[n:], kv))


@dataclass
class Prefill:
    span: SeqSpan
    runs: list[tuple[int, int]] | None  # the context read in place, or None: gathered at `slots`
    slots: torch.Tensor | None


@dataclass
class DecodeIndex:
    slots: torch.Tensor  # [sequences, longest context]: pool slots of every position, padded
    mask: torch.Tensor  # [sequences, 1, 1, longest context]: True where a position is the sequence's


class TorchPlan:
    def __init__(
        self, kv: KVCache, device: torch.device, decode: DecodeIndex | None, prefills: list[Prefill]
    ) -> None:
        self.kv, self.device, self.decode, self.prefills = kv, device, decode, prefills

    def forward(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        outs, row = [], 0
        if self.decode is not None:
            row = self.decode.slots.shape[0]
            outs.append(self._decode(layer, q[:row]))
        for p in self.prefills:
            rows = slice(row, row + p.span.length)
            outs.append(self._prefill(layer, q[rows], k[rows], v[rows], p))
            row += p.span.length
        return outs[0] if len(outs) == 1 else torch.cat(outs)

    def _pool(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The layer's K, V as flat slot rows `[slots, kv_heads, head_dim]` (views)."""
        shape = (-1, *self.kv.k.shape[-2:])
        return self.kv.k[layer].view(shape), self.kv.v[layer].view(shape)

    def _decode(self, layer: int, q: torch.Tensor) -> torch.Tensor:
        index = self.decode
        assert index is not None
        b, length = index.slots.shape
        pool_k, pool_v = self._pool(layer)
        kvh, d = pool_k.shape[1:]
        keys, values = (
            pool.index_select(0, index.slots.view(-1)).view(b, length, kvh, d).transpose(1, 2)
            for pool in (pool_k, pool_v)
        )
        out = F.scaled_dot_product_attention(q.reshape(b, kvh, -1, d), keys, values, attn_mask=index.mask)
        return out.reshape(q.shape)

    def _prefill(
        self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, p: Prefill
    ) -> torch.Tensor:
        kh, vh = k.transpose(0, 1), v.transpose(0, 1)  # [kv_heads, T, head_dim]
        if p.span.start == 0:
            return causal_attention(q, kh, vh, 0)
        pool_k, pool_v = self._pool(layer)
        if p.runs is not None:
            context = [
                (pool_k[a : a + n].transpose(0, 1), pool_v[a : a + n].transpose(0, 1)) for a, n in p.runs
            ]
            return parts_attention(q, context, kh, vh)
        assert p.slots is not None
        ck, cv = (pool.index_select(0, p.slots).transpose(0, 1) for pool in (pool_k, pool_v))
        if self.device.type in ("cpu", "cuda"):
            return parts_attention(q, [(ck, cv)], kh, vh)
        return causal_attention(q, torch.cat((ck, kh), 1), torch.cat((cv, vh), 1), p.span.start)


def _decode_index(spans: list[SeqSpan], kv: KVCache, device: torch.device) -> DecodeIndex | None:
    """Pool slots of every decode span's positions [0, start + 1), padded to the longest, and the mask of
    real ones: built on the device from the block tables (one small transfer)."""
    if not spans:
        return None
    bs = kv.block_size
    longest = max(s.start + 1 for s in spans)
    width = -(-longest // bs)
    tables = to_device(padded([s.block_table[:width] for s in spans], width), torch.long, device)
    lengths = to_device([s.start + 1 for s in spans], torch.long, device)
    pos = torch.arange(longest, device=device)
    slots = tables.gather(1, (pos // bs).expand(len(spans), -1)) * bs + pos % bs
    return DecodeIndex(slots, (pos < lengths[:, None])[:, None, None, :])


def _prefills(spans: Sequence[SeqSpan], kv: KVCache) -> list[Prefill]:
    out = []
    for s in spans:
        runs = contiguous_runs(s.block_table, s.start, kv.block_size, MAX_RUNS) if s.start else []
        slots = None
        if s.start and (runs is None or kv.k.device.type not in ("cpu", "cuda")):
            table = torch.tensor(s.block_table, dtype=torch.long)
            pos = torch.arange(s.start)
            slots = (table[pos // kv.block_size] * kv.block_size + pos % kv.block_size).to(kv.k.device)
            runs = None
        out.append(Prefill(s, runs, slots))
    return out
