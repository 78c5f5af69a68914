"""`Snapshot`: the K/V of a prompt computed from position 0, the material approximate plans reuse, with
whether it is exact and which weights computed it.

Only the exact constructors (`snapshot`, `cached_snapshot`) mark a snapshot exact and stamp it with the
engine's weights namespace (weights digest and dtype, the block manager's); a `Snapshot` built by hand is
not exact unless it says so. `check_sources` refuses a snapshot of other weights or another dtype (its rows
would be cast silently into the window) and one whose weights are not recorded.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch

from engine.errors import KVPlanError
from engine.kv.window import KVWindow
from engine.runtime.engine import Engine


@dataclass(frozen=True)
class Snapshot:
    """K/V of `token_ids` computed from position 0: k, v `[layers, kv_heads, len, head_dim]`, keys post-RoPE.
    `exact`: they are the exact K/V of these tokens (so reused in place they count as cached tokens);
    `namespace`: the weights that computed them, `<weights digest>:<dtype>` ("" when not recorded)."""

    token_ids: tuple[int, ...]
    k: torch.Tensor
    v: torch.Tensor
    exact: bool = False
    namespace: str = ""


def weights_namespace(engine: Engine) -> str:
    """The engine's weights namespace: its block manager's (weights digest and dtype)."""
    return engine.blocks.namespace.decode()


def snapshot(engine: Engine, token_ids: Sequence[int]) -> Snapshot:
    """Compute the exact K/V of `token_ids` from position 0 (cold, in a private window)."""
    ids = list(token_ids)
    window = KVWindow.like(engine.kv, len(ids))
    engine.runner.compute(ids, window)
    return Snapshot(tuple(ids), window.k, window.v, exact=True, namespace=weights_namespace(engine))


def cached_snapshot(engine: Engine, token_ids: Sequence[int], salt: str = "") -> Snapshot | None:
    """The exact K/V of the longest cached block prefix of `token_ids`, copied out of the pool (None if no
    block is cached). The blocks are only read: their ref counts and LRU order are left as they are."""
    hits, _ = engine.blocks.match(list(token_ids), salt)
    n = len(hits) * engine.blocks.block_size
    if not n:
        return None
    window = KVWindow.from_blocks(engine.kv, hits, n, n)
    return Snapshot(tuple(token_ids[:n]), window.k, window.v, exact=True, namespace=weights_namespace(engine))


def check_sources(engine: Engine, sources: Iterable[Snapshot]) -> None:
    """Refuse (KVPlanError) any snapshot not computed by this engine's weights in its dtype."""
    ours = weights_namespace(engine)
    for s in sources:
        if s.namespace != ours:
            theirs = f"weights {_short(s.namespace)}" if s.namespace else "weights not recorded"
            raise KVPlanError(
                f"a snapshot of {theirs} cannot be reused by an engine of weights {_short(ours)}: its K/V "
                "belong to other weights or another dtype; compute it with snapshot() on this engine"
            )


def _short(namespace: str) -> str:
    """`<digest>:<dtype>` with the digest cut to 16 characters."""
    digest, _, dtype = namespace.rpartition(":")
    return f"{digest[:16]}:{dtype}"
