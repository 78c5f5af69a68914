"""DeepSeek's context caching on disk as first documented (2024-08-02), kept as `deepseek-2024`.

Source: https://api-docs.deepseek.com/news/news0802 (checked 2026-12-01): prefixes are stored in 64-token
units from token 0, best effort (nothing under 64 tokens; unused entries are cleared within hours to days:
modelled as never expiring); a cache hit costs a tenth of a miss ($0.014 vs $0.14 per million tokens at
launch). The current guide's rule is `deepseek` (engine/traces/providers/deepseek.py).
"""

from __future__ import annotations

from engine.traces.providers.base import RulePrompt, Served, priced, unit_miss
from engine.traces.providers.prefix_units import UnitPrefixCache

UNIT = 64
READ_PRICE = 0.1


class DeepSeek2024Rule:
    name = "deepseek-2024"
    unit = UNIT

    def __init__(self) -> None:
        self.cache = UnitPrefixCache(UNIT)

    def serve(self, prompt: RulePrompt) -> Served:
        match = self.cache.serve(prompt.token_ids, prompt.time_s, None, prompt.model or "")
        cached = match.tokens
        stored = len(prompt.token_ids) // UNIT * UNIT
        return Served(
            cached,
            0,
            priced(len(prompt.token_ids), cached, READ_PRICE),
            stored_tokens=stored,
            below_minimum=len(prompt.token_ids) < UNIT,
            why_none=unit_miss(cached, UNIT, len(prompt.token_ids), match.expired, UNIT),
        )
