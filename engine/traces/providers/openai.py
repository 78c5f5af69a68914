"""OpenAI's automatic prompt caching, as documented.

Source: https://platform.openai.com/docs/guides/prompt-caching (checked 2026-12-01): no caching below 1,024
prompt tokens; hits in 128-token increments (1,024, 1,152, 1,280, ...); with the default in-memory
retention cached prefixes stay 5-10 minutes of inactivity, always cleared within an hour: modelled as
5 minutes, the documented lower bound (`retention_s` sets the other end); `prompt_cache_retention: "24h"`
(extended retention) keeps them up to 24 hours: modelled as 24 hours. Requests are routed to a machine by a
hash of the prompt's first ~256 tokens combined with `prompt_cache_key` when one is given: requests with
different keys (or a key and none) land apart, modelled as separate caches; one machine serving a key
spills to others past ~15 requests a minute, which this rule ignores. No write surcharge on these models.

Read prices (the pricing page's cached-input price over its input price, https://platform.openai.com/docs/pricing,
as of 2026-12-01: the gpt-4o / gpt-4.1 / gpt-5 rows as the project's reference notes give them, the o-series
rows from the published per-model prices, o1 $15.00 / $7.50, o1-mini and o3-mini $1.10 / $0.55, o3 $2.00 /
$0.50, o4-mini $1.10 / $0.275 per million tokens): 0.5 for gpt-4o / gpt-4o-mini and the o1 family (o1,
o1-mini, o3-mini); 0.25 for gpt-4.1 (and -mini, -nano), o3 and o4-mini; 0.1 for gpt-5 and its point releases
(gpt-5.x, -mini, -nano, -codex).
"""

from __future__ import annotations

from engine.traces.providers.base import RulePrompt, Served, per_model, priced, unit_miss
from engine.traces.providers.prefix_units import UnitPrefixCache

MIN_TOKENS = 1024
INCREMENT = 128
RETENTION_S = {"in_memory": 5 * 60.0, "24h": 24 * 3600.0}
READ_PRICE: dict[str, int | float] = {
    "gpt-4o": 0.5,
    "o1": 0.5,
    "o3-mini": 0.5,
    "gpt-4.1": 0.25,
    "o3": 0.25,
    "o4-mini": 0.25,
    "gpt-5": 0.1,
}
DEFAULT_MODEL = "gpt-4.1"


def held(prompt_tokens: int) -> int:
    """What a prompt leaves servable: its 128-token increments, from 1,024 tokens."""
    stored = prompt_tokens // INCREMENT * INCREMENT
    return stored if stored >= MIN_TOKENS else 0


class OpenAIRule:
    name = "openai"
    unit = INCREMENT

    def __init__(self, retention_s: float = RETENTION_S["in_memory"]) -> None:
        self.cache = UnitPrefixCache(INCREMENT)
        self.retention_s = retention_s

    def serve(self, prompt: RulePrompt) -> Served:
        retention = RETENTION_S["24h"] if prompt.retention == "24h" else self.retention_s
        partition = f"{prompt.model or ''}\0{prompt.cache_key or ''}"
        match = self.cache.serve(prompt.token_ids, prompt.time_s, retention, partition)
        cached = match.tokens if match.tokens >= MIN_TOKENS else 0
        read = per_model(READ_PRICE, prompt.model, DEFAULT_MODEL)
        return Served(
            cached,
            0,
            priced(len(prompt.token_ids), cached, read),
            stored_tokens=held(len(prompt.token_ids)),
            below_minimum=0 < match.tokens < MIN_TOKENS,
            unreached="ttl_expired" if match.expired else None,
            why_none=unit_miss(match.tokens, MIN_TOKENS, len(prompt.token_ids), match.expired, INCREMENT),
        )
