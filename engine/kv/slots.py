"""Slot arithmetic of the paged pool, on the host: where a sequence's positions live, given its block table.

Position p of a sequence lives in slot `block_table[p // block_size] * block_size + p % block_size` of the
pool's flat `[blocks x block_size]` rows (see `KVCache`).
"""

from __future__ import annotations


def slots_of(block_table: list[int], start: int, end: int, block_size: int) -> list[int]:
    """Slots of positions [start, end)."""
    return [block_table[p // block_size] * block_size + p % block_size for p in range(start, end)]


def contiguous_runs(
    block_table: list[int], end: int, block_size: int, limit: int
) -> list[tuple[int, int]] | None:
    """Positions [0, end) as runs of consecutive slots, (first slot, length) in position order: a run is a
    stretch of blocks with consecutive ids, which attention can read in place as one strided view. None when
    there are more than `limit` runs (a fragmented table: gather instead)."""
    runs: list[tuple[int, int]] = []
    for i in range(-(-end // block_size)):
        first, length = block_table[i] * block_size, min(block_size, end - i * block_size)
        if runs and runs[-1][0] + runs[-1][1] == first:
            runs[-1] = (runs[-1][0], runs[-1][1] + length)
        elif len(runs) == limit:
            return None
        else:
            runs.append((first, length))
    return runs


def padded(tables: list[list[int]], width: int | None = None) -> list[list[int]]:
    """Block tables as rows of one width (the longest, or `width`), padded with block 0: whatever a padded
    entry points at is masked out or never read."""
    width = max((len(t) for t in tables), default=0) if width is None else width
    return [t + [0] * (width - len(t)) for t in tables]
