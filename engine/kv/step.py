"""`StepContext`: what one forward step reads from and writes to the KV storage, for every sequence in it.

A step runs the new tokens of one or more sequences as one batch (their rows concatenated in order): the
linear layers see all rows at once, attention runs per sequence over its own context (a `SeqSpan`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from engine.kv.pool import KVCache
from engine.kv.window import KVWindow

# Called per layer with post-RoPE queries [T, heads, head_dim] and all keys [L, kv_heads, head_dim].
QKObserver = Callable[[int, torch.Tensor, torch.Tensor], None]


@dataclass
class SeqSpan:
    """One sequence's `length` new tokens in a step, at positions start, start + 1, ...

    Query i sees positions [0, start + i]. With a `window`, the context [0, start) is its rows and the new
    K/V become rows [start, start + length); without one, a span after a prefix (start > 0) gathers the
    context from the pool at `read_slots` (positions [0, start + length), the new ones included); with
    neither, there is no context: start is 0.

    `positions` (ascending, window required) scatters the new tokens instead: token i is at positions[i],
    its K/V go to that window row, and it sees every window row up to it. The rows between are whatever the
    window holds (reused K/V of an approximate assembly), so a plan's computed runs take one forward.
    """

    start: int
    length: int
    window: KVWindow | None = None
    read_slots: torch.Tensor | None = None
    positions: torch.Tensor | None = None


@dataclass
class StepContext:
    """The step's spans, in the order of its token rows. The first len(write_slots) rows have their K/V
    written to the pool at `write_slots` (sequences that keep their K/V only in a window come after them)."""

    spans: list[SeqSpan] = field(default_factory=list)
    kv: KVCache | None = None
    write_slots: torch.Tensor | None = None
    observe: QKObserver | None = None

    @classmethod
    def plain(cls, length: int, observe: QKObserver | None = None) -> StepContext:
        """A causal forward of `length` tokens from position 0 with no cache."""
        return cls([SeqSpan(0, length)], observe=observe)

    def positions(self, device: torch.device) -> torch.Tensor:
        """The absolute position of every token row, `[total length]` on `device`."""
        if len(self.spans) == 1 and self.spans[0].positions is None:
            span = self.spans[0]
            return torch.arange(span.start, span.start + span.length, device=device)
        parts = [
            s.positions.cpu() if s.positions is not None else torch.arange(s.start, s.start + s.length)
            for s in self.spans
        ]
        return torch.cat(parts).to(device)
