"""Where two renderings of a prompt part differ, in its own text: the spans, with the characters around them.

Two texts are compared in two steps: the common prefix and suffix are cut back to line starts and ends; if
the lines left are the same lines in another order that is one span (a reordered list), else the words
left are aligned (difflib) and every run that differs is a span, widened to whole words so that a clock or
a path reads whole. `char` is the span's first character in the later text (`after`), `lead` the text just
before it there (what finds the span in a rendered prompt).
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from dataclasses import dataclass

from engine.prompts.regions import common_prefix

LEAD_CHARS = 48  # characters of `lead` kept before a span
MAX_SPANS = 8  # spans kept per compared text: the rest are counted, not listed
WORDS = re.compile(r"\s+|\S+")


@dataclass(frozen=True)
class TextSpan:
    char: int  # first character of the span in the later text
    before: str
    after: str
    lead: str  # the later text's characters just before the span


def _line_bounds(a: str, b: str) -> tuple[int, int]:
    """The common prefix cut back to a line start, and the common suffix cut back to a line end."""
    pre = common_prefix(a, b)
    pre = a.rfind("\n", 0, pre) + 1
    suf = common_prefix(a[pre:][::-1], b[pre:][::-1])
    tail = a[len(a) - suf :]
    cut = tail.find("\n")
    return pre, (suf - cut if cut >= 0 else 0)


def text_spans(before: str, after: str) -> tuple[list[TextSpan], int]:
    """The spans where `after` differs from `before` (at most MAX_SPANS) and how many more there were."""
    if before == after:
        return [], 0
    pre, suf = _line_bounds(before, after)
    a, b = before[pre : len(before) - suf], after[pre : len(after) - suf]
    la, lb = a.split("\n"), b.split("\n")
    if len(la) > 1 and la != lb and Counter(la) == Counter(lb):
        return [TextSpan(pre, a, b, after[max(0, pre - LEAD_CHARS) : pre])], 0
    wa, wb = WORDS.findall(a), WORDS.findall(b)
    spans: list[TextSpan] = []
    matcher = difflib.SequenceMatcher(None, wa, wb, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        i1, i2, j1, j2 = _trim_space(wa, wb, i1, i2, j1, j2)
        char = pre + sum(len(w) for w in wb[:j1])
        spans.append(
            TextSpan(char, "".join(wa[i1:i2]), "".join(wb[j1:j2]), after[max(0, char - LEAD_CHARS) : char])
        )
    return spans[:MAX_SPANS], max(0, len(spans) - MAX_SPANS)


def _trim_space(wa: list[str], wb: list[str], i1: int, i2: int, j1: int, j2: int) -> tuple[int, ...]:
    """A differing run without whitespace words at its ends where both sides have other words."""
    while i2 - i1 > 1 and j2 - j1 > 1 and wa[i1] == wb[j1] and wa[i1].isspace():
        i1, j1 = i1 + 1, j1 + 1
    while i2 - i1 > 1 and j2 - j1 > 1 and wa[i2 - 1] == wb[j2 - 1] and wa[i2 - 1].isspace():
        i2, j2 = i2 - 1, j2 - 1
    return i1, i2, j1, j2
