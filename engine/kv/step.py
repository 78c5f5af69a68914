"""What one forward step reads and writes: its sequences' spans of new tokens (`SeqSpan`), the paged attention
that reads their context from the pool (`PagedAttention`, planned once per step by an `AttentionBackend` of
engine/model/attention), and the step as the model sees it (`StepContext`).

Every exact path (a cold prefill, a prefill after a cached prefix, a decode step, a batch of them) is a paged
step: each layer writes the step's new K/V once, to the pool at `write_slots`, then one attention dispatch
reads every sequence's keys [0, start + length) through its block table. The two other kinds of forward have
no pool: a plain causal forward from position 0 (the reference, attention maps) and a forward into a private
window (`WindowSpan`: the opt-in approximate experiments of engine/approx).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import torch

from engine.kv.decode_buffers import DecodeBuffers
from engine.kv.pool import KVCache
from engine.kv.window import KVWindow

# Called per layer with post-RoPE queries [T, heads, head_dim] and all keys [L, kv_heads, head_dim].
QKObserver = Callable[[int, torch.Tensor, torch.Tensor], None]


@dataclass
class SeqSpan:
    """One sequence's `length` new tokens in a step, at positions start, start + 1, ...: query i sees
    positions [0, start + i], all of them in the pool's blocks of `block_table` once the step has written its
    own (the table covers positions [0, start + length))."""

    start: int
    length: int
    block_table: list[int] = field(default_factory=list)


class PagedAttention(Protocol):
    """A step's attention, planned once (indices on the device) and called once per layer for the whole
    batch: q `[T, heads, head_dim]` (the step's rows, spans in order), the step's own k, v `[T, kv_heads,
    head_dim]` (already in the pool), output `[T, heads, head_dim]`."""

    def forward(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor: ...


class AttentionBackend(Protocol):
    name: str
    description: str  # what runs, recorded in every result's environment (Engine.info["attention"])

    def plan(self, spans: Sequence[SeqSpan], kv: KVCache) -> PagedAttention: ...

    def static_decode(self, buffers: DecodeBuffers, kv: KVCache, num_heads: int) -> PagedAttention | None:
        """The attention of a static decode step over `buffers` (a CUDA graph's), or None: the eager step."""
        ...


@dataclass
class WindowSpan:
    """A forward into a private window (approximate experiments only): `length` tokens at positions start..
    over its rows [0, start), or at ascending `positions` over whatever rows it holds (reused K/V), each token
    seeing every row up to its own."""

    window: KVWindow
    start: int
    length: int
    positions: torch.Tensor | None = None


@dataclass
class StepContext:
    """The step's spans in the order of its token rows, and how attention reads them: `attention` over the
    pool (K/V written at `write_slots` first), a `window`, or neither (one causal sequence from 0)."""

    spans: list[SeqSpan]
    kv: KVCache | None = None
    write_slots: torch.Tensor | None = None
    attention: PagedAttention | None = None
    window: WindowSpan | None = None
    observe: QKObserver | None = None
    token_positions: torch.Tensor | None = None  # the rows' positions, on the device (paged steps)

    @classmethod
    def plain(cls, length: int, observe: QKObserver | None = None) -> StepContext:
        """A causal forward of `length` tokens from position 0 with no cache."""
        return cls([SeqSpan(0, length)], observe=observe)

    @classmethod
    def windowed(cls, span: WindowSpan) -> StepContext:
        return cls([SeqSpan(span.start, span.length)], window=span)

    def positions(self, device: torch.device) -> torch.Tensor:
        """The absolute position of every token row, `[total length]` on `device`."""
        if self.token_positions is not None:
            return self.token_positions
        if self.window is not None and self.window.positions is not None:
            return self.window.positions.to(device)
        span = self.spans[0]
        return torch.arange(span.start, span.start + span.length, device=device)
