"""A prefix cache of fixed-size token units chained from token 0: what OpenAI (128-token increments),
DeepSeek's 2024 rule (64-token units) and Gemini describe. A unit is served when it and every unit before
it were stored by an earlier request and have not expired; serving or storing a unit refreshes it (for the
retention of the request that touched it, the longer one kept). Caches are partitioned (by model, and by
OpenAI's cache key): units chain from a root per partition. With `exact`, a match of at least one unit
then extends token by token into the next unit, against the prompt that last stored the deepest matched
unit (for a rule documented at token granularity)."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass

from engine.kv.block_manager import chain_hash, token_bytes
from engine.prompts.regions import common_prefix

NEVER = math.inf


@dataclass(frozen=True)
class UnitMatch:
    tokens: int  # matched from token 0
    expired: bool  # the match stopped at a unit that was stored but had expired


class UnitPrefixCache:
    def __init__(self, unit: int, exact: bool = False) -> None:
        self.unit, self.exact = unit, exact
        self.expires: dict[bytes, float] = {}  # unit chain hash -> when it expires
        self.owner: dict[bytes, Sequence[int]] = {}  # unit chain hash -> the prompt that last stored it
        self.previous: tuple[str, Sequence[int], list[bytes]] = ("", (), [])  # last partition, prompt, hashes

    def _hashes(self, ids: Sequence[int], partition: str) -> list[bytes]:
        """Chained hashes of the full units of `ids`, those of the units it shares with the previous prompt
        of the same partition reused (a growing conversation hashes only what it appended)."""
        u, (prev_part, prev_ids, prev_hashes) = self.unit, self.previous
        keep = min(common_prefix(ids, prev_ids) // u, len(prev_hashes)) if prev_part == partition else 0
        out, data = prev_hashes[:keep], token_bytes(ids)
        root = hashlib.blake2b(f"partition:{partition}".encode(), digest_size=16).digest()
        for i in range(keep, len(ids) // u):
            out.append(chain_hash(out[-1] if out else root, data[8 * i * u : 8 * (i + 1) * u]))
        self.previous = (partition, ids, out)
        return out

    def serve(
        self, ids: Sequence[int], now: float, retention_s: float | None, partition: str = ""
    ) -> UnitMatch:
        """What of `ids` is matched from token 0; then `ids` is stored, its units kept `retention_s` (None:
        never expiring) from now."""
        hashes = self._hashes(ids, partition)
        units = next((i for i, h in enumerate(hashes) if self.expires.get(h, -NEVER) < now), len(hashes))
        expired = units < len(hashes) and hashes[units] in self.expires
        matched = units * self.unit
        if self.exact and units:
            other = self.owner[hashes[units - 1]]
            stop = min(len(ids), len(other), matched + self.unit)
            while matched < stop and ids[matched] == other[matched]:
                matched += 1
        until = now + retention_s if retention_s is not None else NEVER
        for h in hashes:
            self.expires[h] = max(self.expires.get(h, -NEVER), until)
            self.owner[h] = ids
        return UnitMatch(matched, expired)
