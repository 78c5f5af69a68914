"""Gemini's implicit caching, as documented.

Source: https://ai.google.dev/gemini-api/docs/caching (page last updated 2026-10-13, checked 2026-12-01):
on by default for Gemini 2.5 and newer; a request's prefix is served when it matches a recent request and
is at least the model's minimum: 2,048 tokens (2.5 Flash, 2.5 Pro), 4,096 (3.x); earlier 2026 versions of
the page said 1,024 for 2.5 Flash and 4,096 for 2.5 Pro. Cached tokens cost 10% of the base input price
(Vertex AI's implicit-caching page: "a 90% discount"). No granularity and no retention are documented:
matched here token by token (found through 64-token units), never expiring: an upper bound.
"""

from __future__ import annotations

from engine.traces.providers.base import RulePrompt, Served, per_model, priced, unit_miss
from engine.traces.providers.prefix_units import UnitPrefixCache

MIN_TOKENS: dict[str, int | float] = {"gemini-2.5": 2048, "gemini-3": 4096, "gemini-4": 4096}
DEFAULT_MODEL = "gemini-2.5"
READ_PRICE = 0.1
LOOKUP_UNIT = 64


class GeminiRule:
    name = "gemini"

    def __init__(self) -> None:
        self.cache = UnitPrefixCache(LOOKUP_UNIT, None, exact=True)

    def serve(self, prompt: RulePrompt) -> Served:
        matched = self.cache.serve(prompt.token_ids, prompt.time_s)
        minimum = per_model(MIN_TOKENS, prompt.model, DEFAULT_MODEL)
        cached = matched if matched >= minimum else 0
        why = unit_miss(matched, minimum, len(prompt.token_ids), self.cache.expired, LOOKUP_UNIT)
        return Served(cached, 0, priced(len(prompt.token_ids), cached, READ_PRICE), why)
