"""Slot arithmetic of the paged pool, on the host: where a sequence's positions live, given its block table.

Position p of a sequence lives in slot `block_table[p // block_size] * block_size + p % block_size` of the
pool's flat `[blocks x block_size]` rows (see `KVCache`).
"""

from __future__ import annotations


def slots_of(block_table: list[int], start: int, end: int, block_size: int) -> list[int]:
    """Slots of positions [start, end)."""
    return [block_table[p // block_size] * block_size + p % block_size for p in range(start, end)]


def padded(tables: list[list[int]], width: int | None = None) -> list[list[int]]:
    """Block tables as rows of one width (the longest, or `width`), padded with block 0: whatever a padded
    entry points at is masked out or never read."""
    width = max((len(t) for t in tables), default=0) if width is None else width
    return [t + [0] * (width - len(t)) for t in tables]
