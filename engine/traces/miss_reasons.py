"""Where a cache miss came from: one request compared with the request it continues, and what a cache
served it. The categories are those of Anthropic's cache diagnostics (`model_changed`, `system_changed`,
`tools_changed`, `messages_changed`, `previous_message_not_found`, `unavailable`) plus those a cache of
known capacity and retention needs (`ttl_expired`, `evicted`, `beyond_lookback`, `below_minimum`,
`first_request`). It serves the trace analysis, per cache rule and for the usage a provider recorded (the
server classifies its own requests' misses in `engine.serve.miss_reason`).

Definitions, for a request R that continues request P (`engine.traces.chains`), served `cached` tokens by
a cache that held `held` tokens of P (and P's reply, where that cache stores replies) right after serving
P, R sharing `shared` tokens with P's prompt and reply (its longest common prefix; None where unknown):

- `first_request`: R continues no request and was served nothing;
- `previous_message_not_found`: R names a request it continues that the trace does not hold, and was
  served nothing;
- `model_changed`, `tools_changed`, `system_changed`, `messages_changed`: the first of these that differs
  between P and R, in that order (a cache is per model, and providers hash tools, then system, then
  messages): the model name; the tool definitions; the leading system messages; P's other messages
  (and its reply, where R carries one) not being the start of R's (history edited, compacted, or cut);
  a miss when `cached < held`. A cache of rendered tokens (the local engine's, and this project's server
  as its recorded usage) sees instead where R's tokens first differ from P's prompt and reply
  (`TokenChange`): the region of that token names the change (`changed_in`), as the server names its own,
  so the label agrees with the region where the tokens broke (tools whose keys came in another order
  render otherwise, though they are equal as values);
- with nothing changed, a miss when `cached` is below `reachable` = min(`held`, `shared`) rounded down to
  the cache's unit: `ttl_expired` when the cache let the entry expire (the rule says so; for recorded
  usage, when the gap since P exceeds the provider's retention), `beyond_lookback` when the entry is live
  but more than 20 blocks before every breakpoint (Anthropic), else `evicted` (the local cache's
  capacity; for recorded usage, whatever made the provider drop or miss an entry it should have held);
- `unavailable`: a miss as above where the trace holds no content to compare (usage-only spans);
- `below_minimum`: nothing changed that a cache would have kept, R was served nothing, shares tokens with
  P, and the cache declined a prefix for being shorter than its minimum.

Anything else is not a miss (None). `missed_tokens` is what the reason cost: all of R's prompt for the
first two, `held - cached` for a change, `reachable - cached` for the cache-side reasons, `shared - cached`
for `below_minimum`.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.traces.request import TraceRequest

REASONS = (
    "first_request",
    "previous_message_not_found",
    "model_changed",
    "tools_changed",
    "system_changed",
    "messages_changed",
    "ttl_expired",
    "beyond_lookback",
    "evicted",
    "unavailable",
    "below_minimum",
)


CHANGED_IN = {"system": "system_changed", "tools": "tools_changed"}  # region kind -> reason


def changed_in(kind: str) -> str:
    """The change a first differing token names, by the kind of region it lies in (engine.prompts.regions:
    system, tools, history, latest_user, status, template): anything but the system prompt and the tool
    definitions is a message."""
    return CHANGED_IN.get(kind, "messages_changed")


@dataclass(frozen=True)
class TokenChange:
    """What a cache of rendered tokens sees changed: `changed_in` of the first token of R that differs from
    P's prompt and reply; None when R extends them (or repeats a prefix of them)."""

    reason: str | None


@dataclass(frozen=True)
class CacheOutcome:
    """What one cache did with R, and what it held of P."""

    prompt_tokens: int  # R's prompt, as this cache counts it
    cached_tokens: int
    held_tokens: int = 0
    shared_tokens: int | None = None
    unit: int = 1
    unreached: str | None = None  # the cache's own reason a held entry was not read ("ttl_expired", ...)
    below_minimum: bool = False


@dataclass(frozen=True)
class Miss:
    reason: str
    missed_tokens: int


def _leading_system(req: TraceRequest) -> tuple[list, list]:
    lead = next((i for i, m in enumerate(req.messages) if m["role"] != "system"), len(req.messages))
    return req.messages[:lead], req.messages[lead:]


def divergence(previous: TraceRequest, current: TraceRequest) -> str | None:
    """The first part of the request that differs, in the order caches key on them; None when `current`
    carries `previous`'s model, tools, system prompt and messages unchanged."""
    if previous.model != current.model and None not in (previous.model, current.model):
        return "model_changed"
    if (previous.tools or []) != (current.tools or []):  # value equality: key order does not matter
        return "tools_changed"
    (sys_p, rest_p), (sys_c, rest_c) = _leading_system(previous), _leading_system(current)
    if sys_p != sys_c:
        return "system_changed"
    if len(rest_c) < len(rest_p) or rest_c[: len(rest_p)] != rest_p:
        return "messages_changed"
    return None


def miss_reason(
    previous: TraceRequest | None,
    current: TraceRequest,
    outcome: CacheOutcome,
    tokens: TokenChange | None = None,
) -> Miss | None:
    """Why `current` missed in this cache (see the module's definitions); None when it did not. `tokens`:
    the change as a cache of rendered tokens sees it (None: the parts compared as a provider hashes them)."""
    cached, held = outcome.cached_tokens, outcome.held_tokens
    if previous is None:
        if cached > 0:
            return None
        reason = "previous_message_not_found" if current.parent_missing else "first_request"
        return Miss(reason, outcome.prompt_tokens)
    content = bool(previous.messages) and bool(current.messages)
    change = divergence(previous, current) if content else None
    if content and tokens is not None and change != "model_changed":
        change = tokens.reason
    if change is not None and cached < held:
        return Miss(change, held - cached)
    shared = outcome.shared_tokens
    reachable = min(held, shared) if shared is not None else held
    reachable = reachable // outcome.unit * outcome.unit
    if change is None and cached < reachable:
        reason = outcome.unreached or "evicted"
        return Miss(reason if content or reason != "evicted" else "unavailable", reachable - cached)
    if outcome.below_minimum and cached == 0 and held == 0 and (shared is None or shared > 0):
        return Miss("below_minimum", shared if shared is not None else outcome.prompt_tokens)
    return None
