"""Anthropic's prompt caching, as documented.

Source: https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching and the pricing page (checked
2026-12-01): the cache key is the request's prefix in the order tools -> system -> messages, with a
boundary after every content block (each tool definition, each system block, each message's text /
tool_use / tool_result block); only prefixes that end at a `cache_control` breakpoint are written (or,
with automatic caching set at the top level, at the last block); at most 4 breakpoints; at each breakpoint
the cache is read there or at up to 20 block boundaries before it; prefixes shorter than the model's
minimum are never cached: 4,096 tokens (Opus 4.5/4.6, Haiku 4.5), 2,048 (Sonnet 4.6, Haiku 3/3.5), 1,024
(Sonnet 3.7/4/4.5, Opus 4/4.1); an entry lives 5 minutes, refreshed free on each hit, or 1 hour with
`"ttl": "1h"`; entries are per model. Price per base input token: writes 1.25x (5 min) or 2x (1 h), reads
0.1x.

Modelled on the request's canonical content blocks (`engine.traces.blocks`): each block boundary is a
chained hash of the blocks so far (rooted at the model), so identity does not depend on how a chat
template renders the request; token counts are the local tokenizer's count of each block's text.
"""

from __future__ import annotations

from engine.traces.providers.base import RulePrompt, Served, per_model, priced
from engine.traces.request import ONE_HOUR

LOOKBACK_BLOCKS = 20
MIN_TOKENS: dict[str, int | float] = {
    "claude-opus-4-5": 4096,
    "claude-opus-4-6": 4096,
    "claude-haiku-4-5": 4096,
    "claude-sonnet-4-6": 2048,
    "claude-3-haiku": 2048,
    "claude-3-5-haiku": 2048,
    "claude-3-7-sonnet": 1024,
    "claude-sonnet-4": 1024,
    "claude-sonnet-4-5": 1024,
    "claude-opus-4": 1024,
    "claude-opus-4-1": 1024,
}
DEFAULT_MODEL = "claude-sonnet-4-5"
READ_PRICE = 0.1
WRITE_PRICE = {False: 1.25, True: 2.0}  # keyed by "is it a 1-hour entry"


def minimum_tokens(model: str | None) -> int:
    return int(per_model(MIN_TOKENS, model, DEFAULT_MODEL))


class AnthropicRule:
    name = "anthropic"
    unit = 1

    def __init__(self) -> None:
        self.entries: dict[bytes, tuple[float, float]] = {}  # prefix hash -> (expires at, ttl)

    def _live(self, h: bytes, now: float) -> bool:
        entry = self.entries.get(h)
        return entry is not None and entry[0] >= now

    def serve(self, prompt: RulePrompt) -> Served:
        minimum, now, chain = minimum_tokens(prompt.model), prompt.time_s, prompt.chain
        total = chain[-1][1] if chain else 0
        marks = [(b, ttl) for b, ttl in prompt.breakpoints if chain[b][1] >= minimum]
        read = -1  # the deepest block read back
        for b, _ in marks:  # the longest live entry any breakpoint's lookback reaches
            for k in range(b, max(b - LOOKBACK_BLOCKS, 0) - 1, -1):
                if chain[k][1] >= minimum and self._live(chain[k][0], now):
                    if k > read:
                        read = k
                    break
        read_tokens = chain[read][1] if read >= 0 else 0
        if read >= 0:
            h, (_, ttl) = chain[read][0], self.entries[chain[read][0]]
            self.entries[h] = (now + ttl, ttl)  # a hit refreshes the TTL
        unreached = self._unreached(prompt, read, now)
        written, write_cost, stored = 0, 0.0, read_tokens
        for b, ttl in sorted(marks):  # every breakpoint past the read prefix writes its entry
            if b > read:
                tokens = chain[b][1]
                write_cost += (tokens - read_tokens - written) * WRITE_PRICE[ttl >= ONE_HOUR]
                written = tokens - read_tokens
                self.entries[chain[b][0]] = (now + ttl, ttl)
                stored = tokens
        return Served(
            read_tokens,
            written,
            priced(total, read_tokens, READ_PRICE, written, write_cost),
            stored_tokens=stored,
            prompt_tokens=total,
            below_minimum=any(0 < chain[b][1] < minimum for b, _ in prompt.breakpoints),
            unreached=unreached,
            why_none="" if read_tokens else _why_none(prompt, marks, minimum, unreached),
        )

    def _unreached(self, prompt: RulePrompt, read: int, now: float) -> str | None:
        """Why an entry deeper than the one read was not read: it is live but beyond every breakpoint's
        lookback, or it expired."""
        deeper = [h for h, _ in prompt.chain[read + 1 :] if h in self.entries]
        if any(self._live(h, now) for h in deeper):
            return "beyond_lookback"
        return "ttl_expired" if deeper else None


def _why_none(prompt: RulePrompt, marks: list[tuple[int, float]], minimum: int, unreached: str | None) -> str:
    """Why nothing was read: no breakpoint, none past the model's minimum, an expired entry, a live one out
    of every breakpoint's lookback, or a first write."""
    if not prompt.breakpoints:
        return "no cache_control breakpoint"
    if not marks:
        return f"breakpoints under the {minimum:,}-token minimum"
    if unreached == "ttl_expired":
        return "expired"
    if unreached == "beyond_lookback":
        return f"entry beyond the {LOOKBACK_BLOCKS}-block lookback"
    return "first write at its breakpoints"
