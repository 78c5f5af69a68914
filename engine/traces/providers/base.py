"""What a cache rule sees of a request, and what it answers.

Token counts come from the local model's tokenizer: a proxy for the provider's own tokenizer, which
counts differently (the shares and the cost ratios carry over better than the absolute numbers).
Costs are in base-input-token equivalents: an uncached input token costs 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from engine.traces.request import ServedSteps


@dataclass(frozen=True)
class RulePrompt:
    token_ids: Sequence[int]
    time_s: float  # when it was sent, in seconds
    model: str | None = None  # the trace's model name: picks per-model rows of a rule's table
    reply_ids: Sequence[int] = field(default_factory=list)  # the reply that follows (an engine caches it)
    # content blocks in Anthropic's order: (chained hash through the block, local tokens through it)
    chain: tuple[tuple[bytes, int], ...] = ()
    breakpoints: tuple[
        tuple[int, float], ...
    ] = ()  # Anthropic: (block index, ttl seconds), automatic included
    cache_key: str | None = None  # OpenAI `prompt_cache_key`
    retention: str | None = None  # OpenAI `prompt_cache_retention`
    cache_salt: str = ""  # the local cache's namespace for it (a server's per-model namespace)
    steps: ServedSteps | None = None  # when the server that recorded it admitted it and published its blocks


@dataclass(frozen=True)
class Served:
    cached_tokens: int  # read from the cache
    written_tokens: int = 0  # billed as cache writes (only where a provider bills writes apart)
    input_cost: float | None = None  # base-input-token equivalents; None where there is no price (local)
    stored_tokens: int = 0  # the prefix of this request (and its reply, where cached) the cache now holds
    prompt_tokens: int | None = None  # the rule's own count of the prompt, where it counts otherwise
    below_minimum: bool = False  # a prefix was declined for being shorter than the rule's minimum
    unreached: str | None = None  # why a held entry was not read: "ttl_expired" or "beyond_lookback"
    why_none: str = ""  # when nothing was read: why (under a minimum, expired, no breakpoint, refused, ...)


class CacheRule(Protocol):
    name: str
    unit: int  # the granularity of what it serves, in tokens

    def serve(self, prompt: RulePrompt) -> Served:
        """Serve one request against the cache state the earlier ones left, and update it."""
        ...


def per_model(table: dict[str, int | float], model: str | None, default: str) -> int | float:
    """The row of `table` whose key is the longest prefix of `model` (the `default` row when none is)."""
    keys = [k for k in table if model and model.startswith(k)]
    return table[max(keys, key=len)] if keys else table[default]


def priced(
    prompt_tokens: int, cached: int, read_price: float, written: int = 0, write_cost: float = 0.0
) -> float:
    """Input cost: uncached tokens at 1, cached at `read_price`, written tokens costed in `write_cost`."""
    return prompt_tokens - cached - written + cached * read_price + write_cost


def unit_miss(matched: int, minimum: int | float, prompt_tokens: int, expired: bool, unit: int) -> str:
    """Why a prefix-unit rule with a minimum served nothing: the prompt or the match under the minimum, the
    matching prefix expired, or nothing stored matches the first unit ("" when it served the match)."""
    if matched >= minimum and matched:
        return ""
    if prompt_tokens < minimum:
        return f"prompt under the {minimum:,}-token minimum"
    if matched:
        return f"{matched:,}-token match under the {minimum:,}-token minimum"
    if expired:
        return "expired"
    return f"first {unit} tokens not cached"
