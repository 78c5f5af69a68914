"""`ModelRunner`: the decoder run over a sequence's positions. It holds the engine's one chunked-prefill
routine (`forward`) and its one decode loop (`decode`); where their K/V are read and written is a `KVTarget`:

- `PagedTarget`: the shared pool at the sequence's block table (grown by the block manager as positions are
  computed), attention reading the sequence's window (or, with no memory for one, gathering from the pool);
- `WindowTarget`: a private window only, which the block manager never sees (the approximate assemblies of
  engine/approx: nothing they compute can reach the pool, so nothing approximate is ever served as a hit).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

from engine.kv.block_manager import BlockManager
from engine.kv.pool import KVCache
from engine.kv.sequence import SequenceState
from engine.kv.step import StepContext
from engine.kv.window import KVWindow
from engine.model.decoder import Decoder


class KVTarget(Protocol):
    def step(self, start: int, end: int) -> StepContext:
        """The context of a forward that computes positions [start, end)."""
        ...

    def written(self, end: int) -> None:
        """Positions [0, end) now have their K/V written."""
        ...


@dataclass
class PagedTarget:
    """A sequence's blocks in the pool, plus its window when there is one (see `KVWindow`)."""

    blocks: BlockManager
    kv: KVCache
    seq: SequenceState
    window: KVWindow | None

    def step(self, start: int, end: int) -> StepContext:
        self.blocks.grow(self.seq, end)
        table = self.seq.block_table
        return StepContext(
            start=start,
            kv=self.kv,
            write_slots=self.kv.slots(table, start, end),
            read_slots=self.kv.slots(table, 0, end) if start > 0 and self.window is None else None,
            window=self.window,
        )

    def written(self, end: int) -> None:
        self.seq.num_kv = end


@dataclass
class WindowTarget:
    """A private window: rows [0, start) are whatever its owner put there; new rows are written after them."""

    window: KVWindow

    def step(self, start: int, end: int) -> StepContext:
        return StepContext(start=start, window=self.window)

    def written(self, end: int) -> None:
        pass


class ModelRunner:
    def __init__(
        self, model: Decoder, device: torch.device, prefill_chunk: int, eos_ids: Sequence[int]
    ) -> None:
        self.model, self.device, self.prefill_chunk = model, device, prefill_chunk
        self.eos_ids = frozenset(eos_ids)

    def forward(self, token_ids: Sequence[int], start: int, end: int, target: KVTarget) -> torch.Tensor:
        """Compute positions [start, end) of `token_ids` over the context [0, start) that `target` holds, in
        chunks of at most `prefill_chunk` tokens; float32 logits `[vocab]` of position end - 1."""
        for s in range(start, end, self.prefill_chunk):
            e = min(s + self.prefill_chunk, end)
            ids = torch.tensor(token_ids[s:e], dtype=torch.long, device=self.device)
            logits = self.model(ids, target.step(s, e))
            target.written(e)
        return logits[0]

    def decode(
        self,
        token_ids: list[int],
        target: KVTarget,
        token: int,
        max_new: int,
        pick: Callable[[torch.Tensor], int],
        stop: Callable[[int], bool] | None = None,
        after_step: Callable[[], None] | None = None,
    ) -> str:
        """Append `token` and then sampled tokens to `token_ids` (the prompt, so far) until EOS, `stop` (given
        how many tokens were generated) or `max_new` new tokens; each step computes the last token's K/V into
        `target`, then `after_step`. Returns the finish reason: "stop" or "length"."""
        generated = 0
        while True:
            token_ids.append(token)
            generated += 1
            if token in self.eos_ids or (stop is not None and stop(generated)):
                return "stop"
            if generated >= max_new:
                return "length"
            logits = self.forward(token_ids, len(token_ids) - 1, len(token_ids), target)
            if after_step is not None:
                after_step()
            token = pick(logits)
