"""A routed replay's report (`bench replay --endpoint URL1 --endpoint URL2 ... --router R`): the replica
column of the per-request table, and per replica what was placed there and what it served."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.bench.reporting.endpoint_report import Row


def request_columns(columns: Sequence[str], routed: bool) -> list[str]:
    """The per-request table's columns: with the replica each went to when a router placed them."""
    return [*columns[:2], "replica", *columns[2:]] if routed else list(columns)


def per_replica(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """Per server of a routed replay: requests placed there, and its prompt, reported and predicted cached
    tokens over the requests compared (both counts exist and are possible)."""
    out = []
    for replica in dict.fromkeys(r.replica for r in rows):
        mine = [r for r in rows if r.replica == replica]
        both = [r for r in mine if r.counted and r.agrees() is not None]
        prompt = sum(r.sent.exchange.reported.prompt_tokens or 0 for r in both)
        reported = sum(r.sent.exchange.reported.cached_tokens or 0 for r in both)
        out.append(
            {
                "replica": replica,
                "requests": len(mine),
                "compared": len(both),
                "prompt_tokens": prompt,
                "cached_reported": reported,
                "cached_predicted": sum(r.predicted.cached_tokens or 0 for r in both),
                "hit_rate_reported": reported / prompt if prompt else None,
            }
        )
    return out
