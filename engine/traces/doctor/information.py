"""Whether a rewritten request keeps every piece of information the original carried: the multiset of its
lines (every message's text and tool calls, each tool definition as one line), compared line by line.

Set aside as structure, not information: `<think>` tags (the reasoning inside them is lines of its own),
blank lines, the whitespace around a line, and a leading role
label (`USER:`, `ASSISTANT:`, `TOOL:`, `SYSTEM:`) that a rewrite turns into the message's role. A line whose
value a rewrite replaced and the report names (a per-request nonce made per-session) is `named`, not lost.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass

from engine.traces.doctor.causes import message_text
from engine.traces.request import TraceRequest

THINK_TAGS = re.compile(r"</?think>")  # reasoning is a piece of its own: its tags cut lines
ROLE_LABEL = re.compile(r"^(USER|ASSISTANT|TOOL|SYSTEM): ?", re.IGNORECASE)


def lines(req: TraceRequest) -> Counter[str]:
    out: Counter[str] = Counter()
    for m in req.messages:
        for line in THINK_TAGS.sub("\n", message_text(m)).split("\n"):
            line = ROLE_LABEL.sub("", line.strip()).strip()
            if line:
                out[line] += 1
    for tool in req.tools or []:
        out[json.dumps(tool, sort_keys=True)] += 1
    return out


@dataclass(frozen=True)
class Kept:
    """Lines of the originals missing from the rewrites (0: everything kept) and lines the rewrites add
    (earlier values kept in the history, a history a window had dropped)."""

    missing: int
    added: int
    example_missing: str = ""
    named: int = 0  # lines whose replaced value the report names


def _renamed(found: Counter[str], swaps: list[tuple[str, str]]) -> int:
    """Each line holding a replaced value, as the rewrite writes it; how many lines that renamed."""
    n = 0
    for value, replacement in swaps:
        for line in [x for x in found if value in x and value != replacement]:
            count = found.pop(line)
            found[line.replace(value, replacement, 1)] += count
            n += count
    return n


def kept(
    originals: list[TraceRequest],
    rewritten: list[TraceRequest],
    replaced: dict[int, list[tuple[str, str]]] | None = None,
) -> Kept:
    """`replaced`: request -> (value, replacement) a rewrite swapped and the report names."""
    missing = added = named = 0
    example = ""
    for i, (a, b) in enumerate(zip(originals, rewritten, strict=True)):
        la, lb = lines(a), lines(b)
        named += _renamed(la, (replaced or {}).get(i, []))
        gone = la - lb
        missing += gone.total()
        added += (lb - la).total()
        if gone and not example:
            example = next(iter(gone))
    return Kept(missing, added, example, named)
