"""A prefix cache of fixed-size token units chained from token 0: what OpenAI (128-token increments),
DeepSeek (64-token units) and Gemini describe. A unit is served when it and every unit before it were
stored by an earlier request and not left idle longer than the retention; serving or storing a unit
refreshes it. With `exact`, a match of at least one unit then extends token by token into the next unit,
against the prompt that last stored the deepest matched unit (for a rule documented at token granularity)."""

from __future__ import annotations

from collections.abc import Sequence

from engine.kv.block_manager import chain_hash, token_bytes
from engine.prompts.regions import common_prefix


class UnitPrefixCache:
    def __init__(self, unit: int, retention_s: float | None, exact: bool = False) -> None:
        self.unit, self.retention_s, self.exact = unit, retention_s, exact
        self.last_used: dict[bytes, float] = {}  # unit chain hash -> when it was last stored or served
        # unit chain hash -> the prompt that last stored it (for `exact`)
        self.owner: dict[bytes, Sequence[int]] = {}
        self.previous: tuple[Sequence[int], list[bytes]] = ((), [])  # the last prompt and its unit hashes
        self.expired = False  # whether the unit the last `serve` stopped at had been stored, and expired

    def _hashes(self, ids: Sequence[int]) -> list[bytes]:
        """Chained hashes of the full units of `ids`, those of the units it shares with the previous prompt
        reused (a growing conversation hashes only what it appended)."""
        u, (prev_ids, prev_hashes) = self.unit, self.previous
        keep = min(common_prefix(ids, prev_ids) // u, len(prev_hashes))
        out, data = prev_hashes[:keep], token_bytes(ids)
        for i in range(keep, len(ids) // u):
            out.append(chain_hash(out[-1] if out else b"", data[8 * i * u : 8 * (i + 1) * u]))
        self.previous = (ids, out)
        return out

    def _alive(self, h: bytes, now: float) -> bool:
        seen = self.last_used.get(h)
        return seen is not None and (self.retention_s is None or now - seen <= self.retention_s)

    def serve(self, ids: Sequence[int], now: float) -> int:
        """Tokens of `ids` matched from token 0 (then `ids` is stored, its units refreshed)."""
        hashes = self._hashes(ids)
        units = next((i for i, h in enumerate(hashes) if not self._alive(h, now)), len(hashes))
        self.expired = units < len(hashes) and hashes[units] in self.last_used
        matched = units * self.unit
        if self.exact and units:
            other = self.owner[hashes[units - 1]]
            stop = min(len(ids), len(other), matched + self.unit)
            while matched < stop and ids[matched] == other[matched]:
                matched += 1
        for h in hashes:
            self.last_used[h] = now
            self.owner[h] = ids
        return matched
