"""DeepSeek's context caching on disk, as documented.

Source: https://api-docs.deepseek.com/news/news0802 and the "Context Caching" guide (2024-08-02 rule,
checked 2026-12-01): prefixes are stored in 64-token units from token 0, best effort (nothing under 64
tokens; unused entries are cleared within hours to days: modelled as never expiring); a cache hit costs a
tenth of a miss ($0.014 vs $0.14 per million tokens at launch). The current guide saves "cache prefix
units" at the end of each user input and model output instead; this rule keeps the documented 64-token one.
"""

from __future__ import annotations

from engine.traces.providers.base import RulePrompt, Served, priced, unit_miss
from engine.traces.providers.prefix_units import UnitPrefixCache

UNIT = 64
READ_PRICE = 0.1


class DeepSeekRule:
    name = "deepseek"

    def __init__(self) -> None:
        self.cache = UnitPrefixCache(UNIT, None)

    def serve(self, prompt: RulePrompt) -> Served:
        cached = self.cache.serve(prompt.token_ids, prompt.time_s)
        why = unit_miss(cached, UNIT, len(prompt.token_ids), self.cache.expired, UNIT)
        return Served(cached, 0, priced(len(prompt.token_ids), cached, READ_PRICE), why)
