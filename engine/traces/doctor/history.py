"""The history rendered append-only: each request that broke in its history becomes the (rewritten)
request it is compared with, that request's reply, and then what the request adds.

What it adds: its messages from the first that differs on, less those the earlier request holds (equal, or
equal once whitespace, reasoning and key order are set aside: a re-rendered message keeps its earlier
rendering); where its message holds the earlier one and then later turns as text (a history folded into
one message), the text after the earlier message, split into messages at its role labels (`USER:`,
`ASSISTANT:`, `TOOL:`). A history a window or a compaction dropped is kept whole: the prompts grow.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from engine.prompts.messages import Message
from engine.traces.analysis import replies
from engine.traces.doctor.causes import Span, message_text, normal
from engine.traces.doctor.moves import with_messages
from engine.traces.request import TraceRequest

LABEL = re.compile(r"^(USER|ASSISTANT|TOOL|SYSTEM): ?", re.MULTILINE)
ROLES = {"USER": "user", "ASSISTANT": "assistant", "TOOL": "tool", "SYSTEM": "system"}


def unfold(text: str, role: str) -> list[Message]:
    """Text holding turns as `ROLE: ...` lines, as messages (text before the first label keeps `role`)."""
    marks = list(LABEL.finditer(text))
    out: list[Message] = []
    head = text[: marks[0].start()] if marks else text
    if head.strip():
        out.append({"role": role, "content": head.strip("\n")})
    for mark, nxt in zip(marks, [*marks[1:], None], strict=True):
        body = text[mark.end() : nxt.start() if nxt else len(text)].rstrip("\n")
        out.append({"role": ROLES[mark.group(1).upper()], "content": body})
    return out


def _added(old: list[Message], new: list[Message]) -> list[Message]:
    """What `new` adds to `old` (module docstring)."""
    k = next((i for i, (o, n) in enumerate(zip(old, new, strict=False)) if o != n), min(len(old), len(new)))
    if k < len(old) and k < len(new):
        o, n = message_text(old[k]), message_text(new[k])
        if (
            n.startswith(o)
            and n != o
            and old[k]["role"] == new[k]["role"]
            and isinstance(new[k].get("content"), str)
        ):
            return unfold(n[len(o) :], new[k]["role"]) + list(new[k + 1 :])
    seen = {normal(m) for m in old}
    return [m for m in new[k:] if normal(m) not in seen]


def append_only(requests: Sequence[TraceRequest], spans: Sequence[Span]) -> list[TraceRequest]:
    following = replies(requests)
    broke = {s.request: s.compared for s in spans}
    out: list[TraceRequest] = []
    for i, req in enumerate(requests):
        p = broke.get(i)
        if p is None or requests[p].session != req.session:
            out.append(req)
            continue
        reply = following[p]
        earlier = out[p].messages
        old = [*requests[p].messages, *([reply] if reply else [])]
        messages = [*earlier, *([reply] if reply else []), *_added(old, req.messages)]
        out.append(with_messages(req, messages))
    return out
