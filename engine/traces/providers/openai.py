"""OpenAI's automatic prompt caching, as documented.

Source: https://platform.openai.com/docs/guides/prompt-caching and the pricing page (checked 2026-12-01):
no caching below 1,024 prompt tokens; hits in 128-token increments (1,024, 1,152, 1,280, ...); cached
prefixes stay in memory for 5-10 minutes of inactivity (up to an hour off-peak): modelled as 5 minutes, the
documented lower bound (set `retention_s` for the other end). No write surcharge on these models; cached
input is billed at 50% (gpt-4o), 25% (gpt-4.1) or 10% (gpt-5.x) of the base input price. Routing is by a
hash of the first ~256 tokens; a cache that spills to another machine misses, which this rule ignores.
"""

from __future__ import annotations

from engine.traces.providers.base import RulePrompt, Served, per_model, priced, unit_miss
from engine.traces.providers.prefix_units import UnitPrefixCache

MIN_TOKENS = 1024
INCREMENT = 128
RETENTION_S = 5 * 60.0
READ_PRICE: dict[str, int | float] = {"gpt-4o": 0.5, "gpt-4.1": 0.25, "gpt-5": 0.1}
DEFAULT_MODEL = "gpt-4.1"


class OpenAIRule:
    name = "openai"

    def __init__(self, retention_s: float = RETENTION_S) -> None:
        self.cache = UnitPrefixCache(INCREMENT, retention_s)

    def serve(self, prompt: RulePrompt) -> Served:
        matched = self.cache.serve(prompt.token_ids, prompt.time_s)
        cached = matched if matched >= MIN_TOKENS else 0
        read = per_model(READ_PRICE, prompt.model, DEFAULT_MODEL)
        why = unit_miss(matched, MIN_TOKENS, len(prompt.token_ids), self.cache.expired, INCREMENT)
        return Served(cached, 0, priced(len(prompt.token_ids), cached, read), why)
