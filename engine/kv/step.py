"""`StepContext`: what one forward step reads from and writes to the KV storage."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from engine.kv.pool import KVCache
from engine.kv.window import KVWindow

# Called per layer with post-RoPE queries [T, heads, head_dim] and all keys [L, kv_heads, head_dim].
QKObserver = Callable[[int, torch.Tensor, torch.Tensor], None]


@dataclass
class StepContext:
    """What one forward step needs to know about the cache.

    `start` is the absolute position of the first new token. New K/V are written to `write_slots` in the pool
    and, with a `window`, to its rows [start, start + T); attention then reads positions [0, start + T) from
    the window. Without one (no device memory for it) a step after a prefix gathers them from the pool at
    `read_slots` (which include the new ones). With `kv is None` the window alone holds the context (a
    private one: the approximate assemblies of engine/approx); with neither, there is no cache: the step
    is a plain causal forward from 0.
    """

    start: int = 0
    kv: KVCache | None = None
    write_slots: torch.Tensor | None = None
    read_slots: torch.Tensor | None = None
    window: KVWindow | None = None
    observe: QKObserver | None = None
