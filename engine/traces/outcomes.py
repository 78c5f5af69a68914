"""What each cache did with one request, in the terms the miss reasons take (`CacheOutcome`): for a cache
rule, from what it served this request and the request this one continues; for the usage a provider
recorded, from the two requests' recorded usage and the provider's documented retention and minimum."""

from __future__ import annotations

from collections.abc import Sequence

from engine.traces.miss_reasons import CacheOutcome
from engine.traces.providers import recorded
from engine.traces.providers.base import Served
from engine.traces.request import TraceRequest


def shared_blocks(chain: Sequence[tuple[bytes, int]], before: Sequence[tuple[bytes, int]]) -> int:
    """Tokens through the last content block two block chains share."""
    n = next(
        (k for k, (a, b) in enumerate(zip(chain, before, strict=False)) if a[0] != b[0]),
        min(len(chain), len(before)),
    )
    return chain[n - 1][1] if n else 0


def rule_outcome(
    served: Served, before: Served | None, prompt_tokens: int, shared: int | None, unit: int
) -> CacheOutcome:
    return CacheOutcome(
        prompt_tokens=served.prompt_tokens or prompt_tokens,
        cached_tokens=served.cached_tokens,
        held_tokens=before.stored_tokens if before is not None else 0,
        shared_tokens=shared,
        unit=unit,
        unreached=served.unreached,
        below_minimum=served.below_minimum,
    )


def recorded_outcome(
    req: TraceRequest, previous: TraceRequest | None, gap_s: float | None
) -> CacheOutcome | None:
    """None where the request has no recorded prompt and cache-read counts."""
    usage = req.recorded
    if usage is None or usage.prompt_tokens is None or usage.cache_read_tokens is None:
        return None
    before = previous.recorded if previous is not None else None
    retention = recorded.retention_s(previous) if previous is not None else None
    expired = retention is not None and gap_s is not None and gap_s > retention
    return CacheOutcome(
        prompt_tokens=usage.prompt_tokens,
        cached_tokens=usage.cache_read_tokens,
        held_tokens=recorded.held(before) if before is not None else 0,
        unit=recorded.UNITS.get(usage.provider, 1),
        unreached="ttl_expired" if expired else None,
        below_minimum=usage.prompt_tokens < recorded.minimum(usage),
    )
