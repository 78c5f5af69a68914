"""`Snapshot`: the exact K/V of a prompt computed from position 0, the material approximate plans reuse."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from engine.kv.window import KVWindow
from engine.runtime.engine import Engine


@dataclass(frozen=True)
class Snapshot:
    """K/V of `token_ids` computed from position 0: k, v `[layers, kv_heads, len, head_dim]`, keys post-RoPE."""

    token_ids: tuple[int, ...]
    k: torch.Tensor
    v: torch.Tensor


def snapshot(engine: Engine, token_ids: Sequence[int]) -> Snapshot:
    """Compute the exact K/V of `token_ids` from position 0 (cold, in a private window)."""
    ids = list(token_ids)
    window = KVWindow.like(engine.kv, len(ids))
    engine.runner.compute(ids, window)
    return Snapshot(tuple(ids), window.k, window.v)


def cached_snapshot(engine: Engine, token_ids: Sequence[int], salt: str = "") -> Snapshot | None:
    """The exact K/V of the longest cached block prefix of `token_ids`, copied out of the pool (None if no
    block is cached). The blocks are only read: their ref counts and LRU order are left as they are."""
    hits, _ = engine.blocks.match(list(token_ids), salt)
    n = len(hits) * engine.blocks.block_size
    if not n:
        return None
    window = KVWindow.from_blocks(engine.kv, hits, n, n)
    return Snapshot(tuple(token_ids[:n]), window.k, window.v)
