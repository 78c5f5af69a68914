"""How the torch backend reads a step's context from the pool: runs of consecutive blocks, read in place
(strided views, which the fused kernels take as they are), or pool slots gathered into one buffer (CPU
decode rows, read run by run: `run_reads`)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from engine.devices import to_device
from engine.kv.slots import padded
from engine.kv.step import SeqSpan


def runs_of(table: list[int], end: int, block_size: int) -> list[tuple[int, int]]:
    """(first slot, length) of each run of consecutive blocks holding positions [0, end), in order (a fresh
    pool hands a prompt's blocks out in order: one run; a cached prefix and the blocks taken after it: two)."""
    runs: list[list[int]] = []
    for block in table[: -(-end // block_size)]:
        if runs and block == runs[-1][0] + runs[-1][1]:
            runs[-1][1] += 1
        else:
            runs.append([block, 1])
    out = [(first * block_size, count * block_size) for first, count in runs]
    if out:  # the last run ends at `end`
        out[-1] = (out[-1][0], end - sum(length for _, length in out[:-1]))
    return out


def slots(spans: Sequence[SeqSpan], ends: list[int], block_size: int, device: torch.device) -> torch.Tensor:
    """Pool slots of positions [0, ends[b]) of every sequence, `[sequences, max(ends)]`, built on the device
    from the block tables (one small transfer); past its end a row repeats its last position (never read
    unmasked, always written)."""
    width = -(-max(ends) // block_size)
    tables = to_device(padded([s.block_table[:width] for s in spans], width), torch.long, device)
    last = (to_device(ends, torch.long, device) - 1).clamp_(min=0)
    pos = torch.minimum(torch.arange(max(ends), device=device)[None, :], last[:, None])
    return tables.gather(1, pos // block_size) * block_size + pos % block_size
