"""DeepSeek's context caching on disk, as the current guide documents it.

Source: https://api-docs.deepseek.com/guides/kv_cache (checked 2026-12-01): each cached prefix is an
independent "cache prefix unit", and a request hits only by matching a whole unit. Units are stored (1) at
the end of each request's user input and at the end of the model's output, (2) at a common prefix the
system detects between requests, and (3) at fixed token intervals inside long inputs and outputs (the
interval is not documented: not modelled, so a long single input that never recurs whole is a miss here,
a lower bound). Modelled: after each request, units at the end of its prompt, at the end of prompt + reply,
and at its longest common prefix with the request served before it; a request is served the longest unit
that is a whole prefix of it. Entries are best effort, cleared within hours to days: modelled as never
expiring. A hit costs a tenth of a miss.

Hits are counted in 64-token units: the matched unit's length rounded down to a multiple of 64, nothing
under 64 tokens. The current guide gives no unit size; the 2024 announcement
(https://api-docs.deepseek.com/news/news0802) gives 64-token storage units, and DeepSeek's recorded usage
still shows them: in a public mini-swe-agent trajectory of 64 `deepseek-v4-flash` calls (2026-06) every
`prompt_cache_hit_tokens` is a multiple of 64: on 32 of the 63 later calls the previous prompt plus its
reply rounded down to 64, on 13 the previous prompt alone so rounded.
"""

from __future__ import annotations

import hashlib
from array import array

from engine.prompts.regions import common_prefix
from engine.traces.providers.base import RulePrompt, Served, priced

READ_PRICE = 0.1
UNIT = 64  # hits are counted in whole 64-token units


def prefix_hashes(ids: list[int], positions: list[int], model: str) -> dict[int, bytes]:
    """The hash of (model, ids[:p]) for every p in `positions` (ascending), in one pass over the tokens."""
    h, data, done, out = (
        hashlib.blake2b(f"model:{model}\0".encode(), digest_size=16),
        array("q", ids).tobytes(),
        0,
        {},
    )
    for p in positions:
        h.update(data[8 * done : 8 * p])
        out[p], done = h.copy().digest(), p
    return out


class DeepSeekRule:
    name = "deepseek"
    unit = UNIT

    def __init__(self) -> None:
        self.units: set[bytes] = set()  # hashes of (model, stored prefix)
        self.lengths: set[int] = set()  # the lengths of the stored prefixes
        self.previous: list[int] = []  # the prompt served before

    def serve(self, prompt: RulePrompt) -> Served:
        ids, model = list(prompt.token_ids), prompt.model or ""
        full = ids + list(prompt.reply_ids)
        common = common_prefix(ids, self.previous)
        ends = [len(ids), len(full), common]
        hashes = prefix_hashes(full, sorted({*[n for n in self.lengths if n <= len(ids)], *ends}), model)
        matched = max((n for n in self.lengths if n <= len(ids) and hashes[n] in self.units), default=0)
        cached = matched // UNIT * UNIT
        for n in ends:
            if n > 0:
                self.units.add(hashes[n])
                self.lengths.add(n)
        self.previous = ids
        why = "" if cached else _why_none(common, len(ids), matched)
        return Served(cached, 0, priced(len(ids), cached, READ_PRICE), stored_tokens=len(full), why_none=why)


def _why_none(common: int, prompt_tokens: int, matched: int) -> str:
    """Why nothing was read: the matched unit is under 64 tokens, the prompt shares a prefix with the
    request before it but contains no stored unit whole (a unit is hit only whole), or no stored unit
    starts it."""
    if matched:
        return f"{matched}-token match under the {UNIT}-token unit"
    if common and common < prompt_tokens:
        return f"shares {common:,} tokens with the request before, no whole stored unit"
    return "no stored unit is a whole prefix of it"
