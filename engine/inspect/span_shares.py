"""Attention shares on chosen key spans, read from the engine's own forward steps as they run.

`observing(model, observer)` hands every step the model runs while it is active (cold prefill, prefill after
a cached prefix, decode) to a `QKObserver` (engine.kv.step): per layer, the step's post-RoPE queries and all
the keys they attend to. `SpanShares` is such an observer: for query rows at absolute positions from `first`
on, it keeps, per layer and head, the attention mass each row puts on each of the given key spans. A step's
query rows are its last T positions of the L keys it sees (its new tokens after their context), so row
position p is query L - T + (p - (L - T)). Nothing of size length × length is built: one row at a time.
Probabilities are softmax(q·Kᵀ / sqrt(head_dim)) in float32, as `engine.inspect.attention` computes them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import torch

from engine.inspect.attention import head_scores
from engine.kv.step import QKObserver, StepContext

if TYPE_CHECKING:
    from engine.model.decoder import Decoder


@contextmanager
def observing(model: Decoder, observer: QKObserver) -> Iterator[None]:
    """Every forward of `model` inside the block also calls `observer` (after any observer of its own)."""

    def chained(ctx: StepContext) -> StepContext:
        own = ctx.observe
        if own is None:
            return dataclasses.replace(ctx, observe=observer)

        def both(layer: int, q: torch.Tensor, k: torch.Tensor) -> None:
            own(layer, q, k)
            observer(layer, q, k)

        return dataclasses.replace(ctx, observe=both)

    def pre_hook(_: torch.nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(chained(a) if isinstance(a, StepContext) else a for a in args)

    handle = model.register_forward_pre_hook(pre_hook)
    try:
        yield
    finally:
        handle.remove()


class SpanShares:
    """A `QKObserver`: per observed row, `[spans, layers, heads]` attention mass on each key span."""

    def __init__(self, model: Decoder, spans: Sequence[tuple[int, int]], first: int, rows: int) -> None:
        cfg = model.config
        self.spans, self.first, self.last = list(spans), first, first + rows  # rows [first, last)
        self.layers, self.heads = cfg.num_layers, cfg.num_heads
        self.scale = cfg.head_dim**-0.5
        device = model.embed.device
        self.head = torch.arange(cfg.num_heads, device=device)
        self.kv_head = self.head // (cfg.num_heads // cfg.num_kv_heads)
        self.rows: dict[int, torch.Tensor] = {}  # absolute row -> float32 [spans, layers, heads]

    def __call__(self, layer: int, q: torch.Tensor, k: torch.Tensor) -> None:
        length, new = k.shape[0], q.shape[0]
        start = length - new  # the step's query rows are positions start .. length - 1
        lo, hi = max(start, self.first), min(length, self.last)
        for row in range(lo, hi):
            query = q[row - start : row - start + 1]
            scores = head_scores(query, k[: row + 1], self.head, self.kv_head, self.scale)
            probs = scores[:, 0].softmax(-1)  # [heads, row + 1]: row sees keys 0..row
            shares = self.rows.setdefault(
                row, torch.full((len(self.spans), self.layers, self.heads), float("nan"))
            )
            shares[:, layer] = torch.stack([probs[:, a:b].sum(-1) for a, b in self.spans]).cpu()

    def at(self, row: int) -> torch.Tensor:
        """`[spans, layers, heads]` of absolute row `row`; every layer must have been observed."""
        if row not in self.rows or torch.isnan(self.rows[row]).any():
            raise RuntimeError(
                f"attention of row {row} was not observed in every layer: the forward path did not call the "
                "QK observer for it"
            )
        return self.rows[row]
