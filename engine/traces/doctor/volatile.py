"""What kind of value a changed span of text is, from its two renderings alone: a clock or date, a path, an
id / nonce / hash, a counter, or the same items in another order. The one text classifier the doctor, the
trace analysis and the server's hint share; the causes that need the requests' structure (tools, history,
model) are named in `engine.traces.doctor.causes`.

A span is the changed text on each side, widened to whole words (`widen`): "09:05" against "09:08" is a
clock where "5" against "8" would be a counter.
"""

from __future__ import annotations

import math
import re
from collections import Counter

CLOCK, PATH, ID, COUNTER, REORDERED, UNKNOWN = (
    "clock",
    "path",
    "id_nonce",
    "counter",
    "reordered_list",
    "unknown",
)
TEXT_KINDS = (CLOCK, PATH, ID, COUNTER, REORDERED, UNKNOWN)

_MONTHS = "jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec"
_DAYS = "(mon|tues|wednes|thurs|fri|satur|sun)day|mon|tue|wed|thu|fri|sat|sun"
CLOCK_PATTERNS = [
    re.compile(r"\d{4}-\d{2}-\d{2}"),  # ISO date
    re.compile(r"\b\d{1,2}:\d{2}(:\d{2})?\b"),  # time of day
    re.compile(r"\b\d{1,2}/\d{1,2}/\d{2,4}\b"),  # 12/02/2026
    re.compile(rf"\b({_MONTHS})[a-z]*\.? \d{{1,2}}\b", re.IGNORECASE),  # Dec 2
    re.compile(rf"\b\d{{1,2}} ({_MONTHS})[a-z]*\b", re.IGNORECASE),  # 2 December
    re.compile(rf"\b({_DAYS})\b", re.IGNORECASE),
    re.compile(r"\b1[6-9]\d{8}(\.\d+)?\b"),  # epoch seconds (2020s)
]
PATH_PATTERN = re.compile(r"(~|\.{1,2})?/[\w.@+-]+/[\w.@+/-]*|[A-Za-z]:\\[\w.\\ -]+|\b[\w.-]+/[\w.-]+/")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)
TOKEN = re.compile(r"[A-Za-z0-9_+/=-]{8,}")
HEX = set("0123456789abcdef")
PUNCTUATION = ".,;:!?()[]{}\"'`"  # around a word, not part of its value
NUMBER = re.compile(r"[-+]?\d+([.,]\d+)?")


def widen(text: str, start: int, end: int) -> tuple[int, int]:
    """[start, end) grown to whole words (runs without whitespace) on both sides."""
    while start > 0 and not text[start - 1].isspace():
        start -= 1
    while end < len(text) and not text[end].isspace():
        end += 1
    return start, end


def is_clock(text: str) -> bool:
    return any(p.search(text) for p in CLOCK_PATTERNS)


def is_path(text: str) -> bool:
    return PATH_PATTERN.search(text) is not None


def entropy_bits(token: str) -> float:
    """Shannon entropy of a token's characters, in bits per character."""
    counts = Counter(token)
    return -sum(c / len(token) * math.log2(c / len(token)) for c in counts.values())


def _random_looking(token: str) -> bool:
    digits = sum(ch.isdigit() for ch in token)
    letters = sum(ch.isalpha() for ch in token)
    hexish = all(ch in HEX for ch in token.lower())
    return digits >= 1 and letters >= 1 and (hexish or entropy_bits(token) >= 2.8)


def core(before: str, after: str) -> tuple[str, str]:
    """What differs between two texts: each without the prefix and suffix they share."""
    n = 0
    while n < min(len(before), len(after)) and before[n] == after[n]:
        n += 1
    m = 0
    while m < min(len(before), len(after)) - n and before[-1 - m] == after[-1 - m]:
        m += 1
    return before[n : len(before) - m], after[n : len(after) - m]


def is_nonce(before: str, after: str) -> bool:
    """A UUID on both sides; or a differing core (`core`) of 4+ letters and digits on each side that looks
    random (hex, or high entropy: digests, keys, `cch=` billing nonces); or, where only one side has text,
    a token of 8+ such characters. Names and prose have fewer digits or less spread."""
    if UUID.search(before) and UUID.search(after):
        return True
    sides = [s for s in (before, after) if s.strip()]
    if len(sides) == 1:
        return any(_random_looking(t) for t in TOKEN.findall(sides[0]))
    cores = core(before, after)
    words = [re.fullmatch(r"[A-Za-z0-9]{4,}", c) for c in cores]
    return all(words) and all(_random_looking(c) for c in cores)


def is_counter(before: str, after: str) -> bool:
    """Both sides are numbers (after stripping what they share): a counter, a balance, a budget."""
    return all(NUMBER.fullmatch(s.strip().strip(PUNCTUATION)) is not None for s in (before, after))


def is_reordered(before: str, after: str) -> bool:
    """The same lines (or, on one line, the same comma-separated items) in another order."""
    for sep in ("\n", ","):
        a, b = [x.strip() for x in before.split(sep)], [x.strip() for x in after.split(sep)]
        if len(a) > 1 and a != b and Counter(a) == Counter(b):
            return True
    return False


def text_kind(before: str, after: str) -> str:
    """The kind of value that changed from `before` to `after` (whole words, see `widen`): the first of
    reordered list, clock, path, id / nonce, counter that both sides (or, for an insertion or deletion, the
    side that has text) show; else unknown."""
    if before and after and is_reordered(before, after):
        return REORDERED
    sides = [s for s in (before, after) if s.strip()]
    if not sides:
        return UNKNOWN
    for kind, test in ((CLOCK, is_clock), (PATH, is_path)):
        if all(test(s) for s in sides):
            return kind
    if is_nonce(before, after):
        return ID
    if len(sides) == 2 and is_counter(before, after):
        return COUNTER
    return UNKNOWN
