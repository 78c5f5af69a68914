"""What a cache rule sees of a request, and what it answers.

Token counts come from the local model's tokenizer: a proxy for the provider's own tokenizer, which
counts differently (the shares and the cost ratios carry over better than the absolute numbers).
Costs are in base-input-token equivalents: an uncached input token costs 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class RulePrompt:
    token_ids: Sequence[int]
    time_s: float  # when it was sent, in seconds
    model: str | None = None  # the trace's model name: picks per-model rows of a rule's table
    # Anthropic: (token position the breakpoint closes, ttl seconds), ascending; automatic caching included
    breakpoints: tuple[tuple[int, float], ...] = ()
    block_ends: tuple[int, ...] = ()  # token positions where content blocks (messages, tools) end, ascending
    reply_ids: Sequence[int] = field(
        default_factory=list
    )  # the reply that follows (a serving engine caches it)


@dataclass(frozen=True)
class Served:
    cached_tokens: int  # read from the cache
    written_tokens: int = 0  # billed as cache writes (only where a provider bills writes apart)
    input_cost: float | None = None  # base-input-token equivalents; None where there is no price (local)
    why_none: str = ""  # when nothing was read: why (under a minimum, expired, no breakpoint, refused, ...)


class CacheRule(Protocol):
    name: str

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
