"""A prefix cache of fixed-size token units chained from token 0: what OpenAI (128-token increments),
DeepSeek (64-token units) and Gemini describe. A unit is served when it and every unit before it were
stored by an earlier request and not left idle longer than the retention; serving or storing a unit
refreshes it. With `exact`, a match of at least one unit then extends token by token into the next unit,
against the prompt that last stored the deepest matched unit (for a rule documented at token granularity)."""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Sequence


class UnitPrefixCache:
    def __init__(self, unit: int, retention_s: float | None, exact: bool = False) -> None:
        self.unit, self.retention_s, self.exact = unit, retention_s, exact
        self.last_used: dict[bytes, float] = {}  # unit chain hash -> when it was last stored or served
        self.owner: dict[
            bytes, Sequence[int]
        ] = {}  # unit chain hash -> the prompt that last stored it (exact)

    def _hashes(self, ids: Sequence[int]) -> list[bytes]:
        u, parent, out = self.unit, b"", []
        data = array("q", ids).tobytes()
        for i in range(len(ids) // u):
            parent = hashlib.blake2b(parent + data[8 * i * u : 8 * (i + 1) * u], digest_size=16).digest()
            out.append(parent)
        return out

    def _alive(self, h: bytes, now: float) -> bool:
        seen = self.last_used.get(h)
        return seen is not None and (self.retention_s is None or now - seen <= self.retention_s)

    def serve(self, ids: Sequence[int], now: float) -> int:
        """Tokens of `ids` matched from token 0 (then `ids` is stored, its units refreshed)."""
        hashes = self._hashes(ids)
        units = next((i for i, h in enumerate(hashes) if not self._alive(h, now)), len(hashes))
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
