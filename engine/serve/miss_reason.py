"""Why a request did not reuse what the previous request of its session left in the cache.

`classify` compares the request with that previous request (its prompt plus the reply tokens whose K/V it
computed) and with what the cache served:

- `expected_cached_tokens`: what the cache would serve from the previous request had nothing been evicted
  (and the model name not changed): their common token prefix, in whole blocks, never the prompt's last
  token;
- `first_change`: the first token where the prompt differs from the previous prompt + reply (-1 when it
  extends them, or only repeats a prefix of them), with `lost_tokens`, the previous tokens after it;
- `reason`, the first that applies:
  `first_request` (no earlier request in the session, and the conversation has no earlier model turn),
  `previous_message_not_found` (no earlier request, but the conversation continues one this server has not
  seen), `model_changed` (another served model name: another cache namespace), `evicted` (fewer tokens
  served than expected: blocks of the unchanged prefix were evicted), then, by the region the first change
  lies in, `system_changed`, `tools_changed` or `messages_changed`; None when nothing was missed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engine.prompts.regions import common_prefix

REASONS = (
    "first_request",
    "previous_message_not_found",
    "model_changed",
    "evicted",
    "system_changed",
    "tools_changed",
    "messages_changed",
)
CHANGED = {"system": "system_changed", "tools": "tools_changed"}  # region kind -> reason; else messages


@dataclass(frozen=True)
class PastRequest:
    """What a finished request left: its id, session, served model name and the tokens whose K/V it
    computed (the prompt and every generated token but the last, which is sampled, never fed)."""

    request_id: str
    session: str
    model: str
    cached_ids: list[int]


@dataclass(frozen=True)
class MissAnalysis:
    expected_cached_tokens: int
    first_change: int  # -1: the prompt extends (or repeats a prefix of) the previous prompt + reply
    lost_tokens: int
    reason: str | None


def classify(
    previous: PastRequest | None,
    prompt_ids: Sequence[int],
    model: str,
    continues: bool,
    cached_tokens: int,
    block_size: int,
    region_kind: Callable[[int], str],
) -> MissAnalysis:
    """`continues`: the request's conversation holds an earlier model turn. `region_kind(i)`: the region
    kind (engine.prompts.regions: system, tools, history, latest_user, status, template) of prompt token i."""
    if previous is None:
        return MissAnalysis(0, -1, 0, "previous_message_not_found" if continues else "first_request")
    before = previous.cached_ids
    shared = common_prefix(prompt_ids, before)
    reusable = min(shared, len(prompt_ids) - 1) // block_size * block_size
    change = shared if shared < min(len(before), len(prompt_ids)) else -1
    lost = len(before) - change if change >= 0 else 0
    if model != previous.model:
        reason: str | None = "model_changed"
    elif cached_tokens < reusable:
        reason = "evicted"
    elif change >= 0:
        reason = CHANGED.get(region_kind(change), "messages_changed")
    else:
        reason = None
    return MissAnalysis(reusable, change, lost, reason)
