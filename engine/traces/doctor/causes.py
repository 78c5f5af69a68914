"""Why a request's prefix broke: the spans where it differs from the request it is compared with, each
named by its cause. One classifier for the doctor, the trace analysis and the server's hint.

A request R is compared with P (the request it continues, or for a session's first request the closest
earlier prompt) plus P's reply, part by part in the order caches key on them, and the first part that
differs is the one that broke the prefix:

- the model name: `model_or_system_swap`;
- the tools: the same definitions in another order, `reordered_list`; added, removed or edited ones,
  `changed_tool_definition`;
- the leading system text: less than half of it kept, `model_or_system_swap`; else each differing span
  named by its text (`engine.traces.doctor.volatile`: clock, path, id / nonce, counter, reordered list,
  unknown);
- the history (P's other messages and its reply against R's): the first message that differs is
  `re_rendered_history` when the two are equal once whitespace, reasoning and key order are set aside, or
  when R's message holds P's and then the turns after it as text (or, as R's last message, grew past
  P's: history folded into one message); `truncated_history` when P's message is gone
  from R and R drops messages (a sliding window, a compaction); else its spans are named by their text.

Causes a comparison of two requests cannot see (the cache expired: `ttl_or_eviction`; tools a template
renders after the break: `tools_after_break`) are named in `engine.traces.doctor.diagnosis`.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from typing import Any

from engine.prompts.messages import Message
from engine.traces.doctor.spans import text_spans
from engine.traces.doctor.volatile import CLOCK, COUNTER, ID, PATH, REORDERED, UNKNOWN, text_kind
from engine.traces.request import TraceRequest

RERENDERED, TRUNCATED, TOOL_CHANGED, SWAP = (
    "re_rendered_history",
    "truncated_history",
    "changed_tool_definition",
    "model_or_system_swap",
)
TOOLS_AFTER, TTL = "tools_after_break", "ttl_or_eviction"
CAUSES = (CLOCK, PATH, ID, COUNTER, REORDERED, RERENDERED, TRUNCATED, TOOL_CHANGED, SWAP, TOOLS_AFTER, TTL)
CAUSES += (UNKNOWN,)
SAME_SYSTEM = 0.5  # share of the system text's words kept, below which the system prompt was swapped
SHOWN_CHARS = 200  # characters of a whole message shown as a span's side
THINK = re.compile(r"<think>.*?</think>", re.DOTALL)


@dataclass(frozen=True)
class Span:
    request: int  # index of R in the trace
    compared: int  # index of P
    region: str  # "model", "tools", "tool NAME", "system", "message #i (role)"
    cause: str
    char: int  # first character in the region's text of R (-1: the region as a whole)
    before: str
    after: str
    lead: str = ""  # R's text just before the span


def message_text(m: Message) -> str:
    """A message's content, then one line per tool call (name and canonical arguments)."""
    calls = [
        f"[{c['function']['name']} {json.dumps(c['function'].get('arguments'), sort_keys=True)}]"
        for c in m.get("tool_calls") or []
    ]
    return "\n".join([str(m.get("content") or ""), *calls]) if calls else str(m.get("content") or "")


def normal(m: Message) -> tuple[str, str]:
    """A message with whitespace, reasoning (`<think>` blocks and reasoning fields) and key order set aside."""
    text = " ".join(THINK.sub("", message_text(m)).split())
    return m["role"], text


def _leading(req: TraceRequest) -> tuple[list[Message], list[Message]]:
    lead = next((i for i, m in enumerate(req.messages) if m["role"] != "system"), len(req.messages))
    return req.messages[:lead], req.messages[lead:]


def tool_name(tool: dict[str, Any]) -> str:
    return str(tool.get("function", tool).get("name", "?"))


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


class _Pair:
    def __init__(self, request: int, compared: int) -> None:
        self.request, self.compared = request, compared

    def span(self, region: str, cause: str, before: str, after: str, char: int = -1, lead: str = "") -> Span:
        return Span(self.request, self.compared, region, cause, char, before, after, lead)

    def text(self, region: str, before: str, after: str) -> list[Span]:
        spans, _ = text_spans(before, after)
        return [
            self.span(region, text_kind(s.before, s.after), s.before, s.after, s.char, s.lead) for s in spans
        ]


def pair_spans(
    previous: TraceRequest, reply: Message | None, current: TraceRequest, request: int, compared: int
) -> list[Span]:
    """The spans of the first part of `current` that differs from `previous` (+ its `reply`), each named."""
    pair = _Pair(request, compared)
    if previous.model != current.model and None not in (previous.model, current.model):
        return [pair.span("model", SWAP, str(previous.model), str(current.model))]
    found = _tools(pair, previous.tools or [], current.tools or [])
    if found:
        return found
    (sys_p, rest_p), (sys_c, rest_c) = _leading(previous), _leading(current)
    text_p = "\n".join(message_text(m) for m in sys_p)
    text_c = "\n".join(message_text(m) for m in sys_c)
    if text_p != text_c:
        words_p, words_c = text_p.split(), text_c.split()
        kept = difflib.SequenceMatcher(None, words_p, words_c, autojunk=False).ratio()
        if kept < SAME_SYSTEM:
            return [pair.span("system", SWAP, text_p[:SHOWN_CHARS], text_c[:SHOWN_CHARS])]
        return pair.text("system", text_p, text_c)
    return _history(pair, [*rest_p, *([reply] if reply else [])], rest_c, len(sys_c))


def _tools(pair: _Pair, before: list[dict], after: list[dict]) -> list[Span]:
    if before == after:
        return []
    names_b, names_a = [tool_name(t) for t in before], [tool_name(t) for t in after]
    if sorted(map(_canonical, before)) == sorted(map(_canonical, after)):
        return [pair.span("tools", REORDERED, "\n".join(names_b), "\n".join(names_a))]
    by_name_b = {tool_name(t): _canonical(t) for t in before}
    by_name_a = {tool_name(t): _canonical(t) for t in after}
    out = []
    for name in dict.fromkeys([*names_b, *names_a]):
        b, a = by_name_b.get(name, ""), by_name_a.get(name, "")
        if a != b:
            spans, _ = text_spans(b, a) if a and b else ([], 0)
            s = spans[0] if spans else None
            out.append(pair.span(f"tool {name}", TOOL_CHANGED, s.before if s else b, s.after if s else a, -1))
    return out


def _history(pair: _Pair, old: list[Message], new: list[Message], offset: int) -> list[Span]:
    """The first message of `new` that differs from `old` (P's messages and reply), and why."""
    k = next((i for i, (o, n) in enumerate(zip(old, new, strict=False)) if o != n), None)
    if k is None:
        return []  # R extends P (or repeats a prefix of it)
    o, n = old[k], new[k]
    region = f"message #{offset + k} ({n['role']})"
    text_o, text_n = message_text(o), message_text(n)
    if normal(o) == normal(n):
        spans = pair.text(region, text_o, text_n)
        return [pair.span(region, RERENDERED, s.before, s.after, s.char, s.lead) for s in spans] or [
            pair.span(region, RERENDERED, text_o[:SHOWN_CHARS], text_n[:SHOWN_CHARS])
        ]
    later = [message_text(m) for m in old[k + 1 :] if message_text(m)]
    folded = all(t in text_n[len(text_o) :] for t in later) and (later or k == len(new) - 1)
    if text_n.startswith(text_o) and o["role"] == n["role"] and folded:  # later turns folded in as text
        cut = len(text_o)
        shown = later[0][:SHOWN_CHARS] if later else ""
        return [pair.span(region, RERENDERED, shown, text_n[cut : cut + SHOWN_CHARS], cut)]
    if o not in new[k:] and (len(new) < len(old) or any(m in new for m in old[k + 1 :])):
        return [pair.span(region, TRUNCATED, text_o[:SHOWN_CHARS], text_n[:SHOWN_CHARS])]
    return pair.text(region, text_o, text_n)
