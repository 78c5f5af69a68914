"""Why a request did not reuse what its previous request left in the cache.

`classify` compares the request with its previous request (engine/serve/sessions.py: the closest earlier
prompt of its client; its prompt plus the reply tokens whose K/V it computed) and with what the cache
served:

- `expected_cached_tokens`: what the cache would serve from the previous request had nothing been evicted
  (and the model name not changed): their common token prefix, in whole blocks, never the prompt's last
  token;
- `first_change`: the first token where the prompt differs from the previous prompt + reply (-1 when it
  extends them, or only repeats a prefix of them), with `lost_tokens`, the previous tokens after it;
- `reason`, the first that applies:
  `first_request` (no previous request, and nothing shows the request continues one),
  `previous_message_not_found` (no previous request, but the request continues one this server has not
  seen: `ChatRequest.continues`, an earlier model turn its client names or a tool turn shows),
  `model_changed` (another served model name: another cache namespace), `evicted` (fewer tokens served
  than expected: blocks of the unchanged prefix were evicted), `reply_retokenized` (the first change
  lies in the previous reply, whose text came back but tokenizes otherwise than the tokens the model
  sampled, the tokenizer's Unicode normalization included (NFC: a sampled U+F9C7 comes back as U+5289):
  `retokenized` holds both tokens' strings around it; the sampled ids are spliced back instead under
  `--splice-sampled on`, where the reply is still kept and the template writes its text verbatim:
  engine/serve/kept_replies.py), `tool_call_rerendered` (the first change lies inside a tool call of the
  previous reply, `<tool_call>` opened before it and not closed: the call came back unchanged and was rendered
  in other text than the model wrote, e.g. other whitespace, its raw text no longer kept: forgotten past the
  memory bound, or given out before a restart; a call the client sent back changed is its own edit), then,
  by the region the first change lies in, `system_changed`, `tools_changed` or `messages_changed`; None when
  nothing was missed. The two reply reasons are the server's own renderings, never the client's edits;
- `hint`, for the last three: the changed span's cause, both renderings of it, the fix, and the tokens the
  cache would have served had only that span differed (`engine.traces.doctor.hint`, the doctor's
  classifier).
"""

from __future__ import annotations

import unicodedata
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engine.prompts.regions import common_prefix
from engine.traces.doctor.hint import token_hint
from engine.traces.miss_reasons import changed_in

REASONS = (
    "first_request",
    "previous_message_not_found",
    "model_changed",
    "evicted",
    "reply_retokenized",
    "tool_call_rerendered",
    "system_changed",
    "tools_changed",
    "messages_changed",
)
PIECES_BEFORE, PIECES_AFTER = 3, 6  # token strings shown around a retokenized reply's divergence
CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"  # the Hermes and generic formats' call tags


def token_array(ids: Sequence[int]) -> array:
    """Token ids as 32-bit integers: 4 bytes a token, and two compare at memcmp speed."""
    return array("i", ids)


@dataclass(frozen=True)
class PastRequest:
    """What a finished request left: its id, client identity, session, served model name, prompt length and
    the tokens whose K/V it computed (the prompt and every generated token but the last, which is sampled,
    never fed)."""

    request_id: str
    identity: str
    session: str
    model: str
    prompt_tokens: int
    cached_ids: array  # token_array


@dataclass(frozen=True)
class MissAnalysis:
    expected_cached_tokens: int
    first_change: int  # -1: the prompt extends (or repeats a prefix of) the previous prompt + reply
    lost_tokens: int
    reason: str | None
    retokenized: dict[str, list[str]] | None = None  # reply_retokenized: {"sampled": [...], "prompt": [...]}
    hint: dict[str, object] | None = None  # a change's cause and fix (engine.traces.doctor.hint)


def classify(
    previous: PastRequest | None,
    prompt_ids: Sequence[int],
    model: str,
    continues: bool,
    cached_tokens: int,
    block_size: int,
    region_kind: Callable[[int], str],
    decode: Callable[[Sequence[int]], str],
    edited: bool = False,
) -> MissAnalysis:
    """`continues`: the request continues an earlier one (`ChatRequest.continues`). `region_kind(i)`: the region
    kind (engine.prompts.regions: system, tools, history, latest_user, status, template) of prompt token i.
    `decode`: token ids to text. `edited`: the client sent a tool call of the previous reply back changed
    (engine/serve/kept_replies.py)."""
    if previous is None:
        return MissAnalysis(0, -1, 0, "previous_message_not_found" if continues else "first_request")
    before = previous.cached_ids
    shared = common_prefix(token_array(prompt_ids), before)
    reusable = min(shared, len(prompt_ids) - 1) // block_size * block_size
    change = shared if shared < min(len(before), len(prompt_ids)) else -1
    lost = len(before) - change if change >= 0 else 0
    pieces, in_call = None, False
    if change >= previous.prompt_tokens:
        pieces = retokenized(before, prompt_ids, change, decode)
        written = decode(before[previous.prompt_tokens : change])
        in_call = written.rfind(CALL_OPEN) > written.rfind(CALL_CLOSE)
    if model != previous.model:
        reason: str | None = "model_changed"
    elif cached_tokens < reusable:
        reason = "evicted"
    elif pieces is not None:
        reason = "reply_retokenized"
    elif in_call and not edited:
        reason = "tool_call_rerendered"
    elif change >= 0:
        reason = changed_in(region_kind(change))
    else:
        reason = None
    hint = None
    if reason in ("system_changed", "tools_changed", "messages_changed"):
        hint = token_hint(before, prompt_ids, change, region_kind(change), decode, block_size).as_dict()
    return MissAnalysis(
        reusable, change, lost, reason, pieces if reason == "reply_retokenized" else None, hint
    )


def retokenized(
    sampled: Sequence[int], prompt: Sequence[int], change: int, decode: Callable[[Sequence[int]], str]
) -> dict[str, list[str]] | None:
    """The token strings of both around `change` when the text agrees through the first differing token of
    each, or through all of `sampled` that is left (the same characters, cut into other tokens); None when
    the text itself differs there."""
    a, b = (nfc(decode(ids[change : change + PIECES_AFTER])) for ids in (sampled, prompt))
    agree = common_prefix(a, b)
    first = max(len(nfc(decode(sampled[change : change + 1]))), len(nfc(decode(prompt[change : change + 1]))))
    if agree == 0 or agree < min(first, len(a)):
        return None
    start = max(change - PIECES_BEFORE, 0)

    def strings(ids: Sequence[int]) -> list[str]:
        return [decode(ids[i : i + 1]) for i in range(start, min(change + PIECES_AFTER, len(ids)))]

    return {"sampled": strings(sampled), "prompt": strings(prompt)}


def nfc(text: str) -> str:
    """Text as the tokenizers normalize it (NFC): the characters a sampled token may come back as."""
    return unicodedata.normalize("NFC", text)
