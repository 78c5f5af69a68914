"""The doctor's cause from token ids alone: what a cache of rendered tokens (the server, `replay
--analyze`) can tell of a break from the request and the one it is compared with.

At the first differing token, the text of both around it is decoded and the differing word of each
(`volatile.widen`) named by the text classifier (`volatile.text_kind`: clock, path, id / nonce, counter,
reordered list, unknown). `would_serve_tokens` is what the cache would have served had only that span
differed: the two token sequences are re-aligned after it (the nearest offsets, within RESYNC tokens of
the break on each side, where SYNC tokens agree) and the tokens they then share are added to the prefix, in
whole blocks, never the prompt's last token. The fix says what to change, by the span's region.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engine.prompts.regions import common_prefix
from engine.traces.doctor.volatile import ID, REORDERED, UNKNOWN, text_kind, widen

WINDOW = 24  # tokens decoded either side of the break
RESYNC, SYNC = 64, 8  # how far past the break the sequences are re-aligned, and on how many tokens
FIXES = {
    "system": "move the changing value out of the system prompt, after everything stable (the newest message)",
    "tools": "keep the tool definitions and their order the same on every request",
    "history": "send the earlier messages exactly as they were sent (append-only history)",
}
KIND_FIXES = {REORDERED: "pin the order of the list", ID: "send one nonce per session, not one per request"}


@dataclass(frozen=True)
class Hint:
    cause: str
    before: str  # the differing word of the compared request
    after: str  # and of this one
    fix: str
    would_serve_tokens: int

    def as_dict(self) -> dict[str, object]:
        return vars(self).copy()


def _resync(before: Sequence[int], prompt: Sequence[int], change: int) -> int:
    """Tokens the two share once re-aligned after the break (0 when they never agree again nearby)."""
    for total in range(1, 2 * RESYNC + 1):
        for a in range(max(0, total - RESYNC), min(total, RESYNC) + 1):
            b = total - a
            x, y = change + a, change + b
            if (
                len(before) - x >= SYNC
                and len(prompt) - y >= SYNC
                and before[x : x + SYNC] == prompt[y : y + SYNC]
            ):
                return common_prefix(before[x:], prompt[y:])
    return 0


def _word(text: str, d: int) -> str:
    """The word around character `d` (`widen`), cut at the chat template's control tokens (`<|...|>`),
    which the text of a template's turn runs into without a space."""
    start, end = widen(text, d, min(d + 1, len(text)))
    left, right = text.rfind("|>", start, d), text.find("<|", d, end)
    return text[left + 2 if left >= 0 else start : right if right >= 0 else end]


def token_hint(
    before: Sequence[int],
    prompt: Sequence[int],
    change: int,
    region: str,
    decode: Callable[[Sequence[int]], str],
    block_size: int,
) -> Hint:
    """`before`: the compared request's tokens (prompt + reply); `change`: the first token where `prompt`
    differs; `region`: the kind of region it lies in (system, tools, or a message kind)."""
    start = max(0, change - WINDOW)
    text_b = decode(before[start : change + WINDOW])
    text_a = decode(prompt[start : change + WINDOW])
    d = common_prefix(text_b, text_a)
    word_b, word_a = _word(text_b, d), _word(text_a, d)
    kind = text_kind(word_b, word_a) if word_b.strip() or word_a.strip() else UNKNOWN
    group = region if region in FIXES else "history"
    fix = KIND_FIXES.get(kind, FIXES[group]) if group == "system" or kind == REORDERED else FIXES[group]
    served = min(change + _resync(before, prompt, change), len(prompt) - 1)
    return Hint(kind, word_b, word_a, fix, served // block_size * block_size)
