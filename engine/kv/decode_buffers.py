"""`DecodeBuffers`: the preallocated inputs of a static decode step (one bucket of batch size and table width),
what a CUDA graph captures once and replays every step.

A decode step of n requests (one token each, every one sampling) runs as `size` rows, the bucket's, n <=
size: rows past n repeat row n - 1 exactly (its token, position, write slot, table), so they write the same
K/V to the same slot and their outputs are dropped. Each step the host writes the rows into staging tensors
made once (pinned on CUDA) and copies them, one transfer per tensor, into device tensors made once: the
step's shapes depend on the bucket alone, never on a host value, and nothing is allocated on the host.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from engine.kv.sequence import SequenceState

BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)  # batch sizes; table widths are powers of two too


def bucket(n: int) -> int:
    """The smallest power of two >= n (batch sizes past the last bucket are not served statically)."""
    return 1 << max(0, n - 1).bit_length()


class DecodeBuffers:
    """`size` rows of a decode step over block tables `width` blocks wide: host staging and device tensors,
    written in place: `ids`, `positions`, `slots` (where each row's new K/V go), `lengths` (each row's keys,
    its own included) `[size]`, and `tables` `[size, width]`."""

    def __init__(self, size: int, width: int, block_size: int, device: torch.device) -> None:
        pin = device.type == "cuda"
        self.size, self.width, self.block_size = size, width, block_size
        self.host_meta = torch.zeros(4, size, dtype=torch.long, pin_memory=pin)
        self.host_tables = torch.zeros(size, width, dtype=torch.long, pin_memory=pin)
        self._meta, self._tables = self.host_meta.numpy(), self.host_tables.numpy()  # the same memory
        self.meta = torch.zeros(4, size, dtype=torch.long, device=device)
        self.tables = torch.zeros(size, width, dtype=torch.long, device=device)
        self.ids, self.positions, self.slots, self.lengths = self.meta.unbind(0)

    def fill(self, seqs: Sequence[SequenceState]) -> None:
        """Stage the step of `seqs` (each computing its last token, at position num_kv) and copy it over."""
        bs, meta, tables = self.block_size, self._meta, self._tables
        for i, seq in enumerate(seqs):
            pos = seq.num_kv
            table = seq.block_table[: pos // bs + 1]
            meta[:, i] = (seq.token_ids[pos], pos, table[-1] * bs + pos % bs, pos + 1)
            tables[i, : len(table)] = table
            tables[i, len(table) :] = table[-1]  # never read past the row's length; a written block
        n = len(seqs)
        meta[:, n:] = meta[:, n - 1 : n]
        tables[n:] = tables[n - 1]
        self.meta.copy_(self.host_meta, non_blocking=True)
        self.tables.copy_(self.host_tables, non_blocking=True)
