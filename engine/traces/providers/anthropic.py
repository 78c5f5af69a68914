"""Anthropic's prompt caching, as documented.

Source: https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching and the pricing page (checked
2026-12-01): only prefixes that end at a `cache_control` breakpoint are cached (or, with automatic caching
set at the top level, at the last block); at most 4 breakpoints; at each breakpoint the cache is checked
there and at up to 20 content-block boundaries before it; prefixes shorter than the model's minimum are
never cached: 4,096 tokens (Opus 4.5/4.6, Haiku 4.5), 2,048 (Sonnet 4.6, Haiku 3/3.5), 1,024 (Sonnet
3.7/4/4.5, Opus 4/4.1); an entry lives 5 minutes, refreshed free on each hit, or 1 hour with `"ttl": "1h"`.
Price per base input token: writes 1.25x (5 min) or 2x (1 h), reads 0.1x.
"""

from __future__ import annotations

import hashlib
from array import array

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


def prefix_hashes(ids: list[int] | tuple[int, ...], positions: list[int]) -> dict[int, bytes]:
    """The hash of ids[:p] for every p in `positions`, in one pass over the tokens."""
    h, data, done, out = hashlib.blake2b(digest_size=16), array("q", ids).tobytes(), 0, {}
    for p in sorted(set(positions)):
        h.update(data[8 * done : 8 * p])
        out[p], done = h.copy().digest(), p
    return out


class AnthropicRule:
    name = "anthropic"

    def __init__(self) -> None:
        self.entries: dict[bytes, tuple[float, float]] = {}  # prefix hash -> (expires at, ttl)

    def serve(self, prompt: RulePrompt) -> Served:
        minimum = per_model(MIN_TOKENS, prompt.model, DEFAULT_MODEL)
        now, ends = prompt.time_s, list(prompt.block_ends)
        marks = [(pos, ttl) for pos, ttl in prompt.breakpoints if pos >= minimum]
        looked = {pos: sorted({*[e for e in ends if e < pos][-LOOKBACK_BLOCKS:], pos}) for pos, _ in marks}
        hashes = prefix_hashes(list(prompt.token_ids), [p for ps in looked.values() for p in ps])
        read, expired = 0, False
        for pos, _ in marks:  # the longest live entry any breakpoint's lookback reaches
            for p in sorted(looked[pos], reverse=True):
                entry = self.entries.get(hashes[p])
                expired |= p >= minimum and entry is not None and entry[0] < now
                if p >= minimum and entry is not None and entry[0] >= now:
                    read = max(read, p)
                    self.entries[hashes[p]] = (now + entry[1], entry[1])  # a hit refreshes the TTL
                    break
        written, write_cost = 0, 0.0
        for pos, ttl in marks:  # every breakpoint past the read prefix writes its entry
            if pos > read + written:
                write_cost += (pos - read - written) * WRITE_PRICE[ttl >= ONE_HOUR]
                written = pos - read
            if pos > read:
                self.entries[hashes[pos]] = (now + ttl, ttl)
        cost = priced(len(prompt.token_ids), read, READ_PRICE, written, write_cost)
        return Served(read, written, cost, "" if read else _why_none(prompt, marks, minimum, expired))


def _why_none(prompt: RulePrompt, marks: list[tuple[int, float]], minimum: int | float, expired: bool) -> str:
    """Why nothing was read: no breakpoint, none past the model's minimum, an expired entry, or a first write."""
    if not prompt.breakpoints:
        return "no cache_control breakpoint"
    if not marks:
        return f"breakpoints under the {minimum:,}-token minimum"
    return "expired" if expired else "first write at its breakpoints"
