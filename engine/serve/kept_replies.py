"""The replies this server gave out, kept as their model sampled them (engine/prompts/sampled.py), so that a
later request carrying one back renders it in the model's own text (and, with `--splice-sampled on`, its own
tokens) instead of the chat template's re-rendering.

A reply is found by the id of its first tool call (the server makes the ids: `ChatRequest.call_id`), or,
without calls, by its text, and only for the client identity it was given to
(engine/serve/client_session.py). An assistant message is rendered from it when its calls are the reply's,
in order, with the same ids, names and arguments as parsed: as the reply's text (`text`, or `tokens`) when
its content is the reply's too, else as its content followed by the calls' raw text (`calls`); a reply
without calls only when its content is the reply's, and only for `tokens` (its text is the content).

Kept in memory, the most recently used last, the oldest forgotten first while they take more than
`max_bytes` (64 MiB: text, raw calls and 4 bytes a token id; the newest is kept whatever its size); none
outlives the server. Used on the preparation threads, under one lock.
"""

from __future__ import annotations

import threading
from array import array
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine.prompts.messages import Message, parse_arguments
from engine.prompts.sampled import CALLS, TEXT, TOKENS, SampledReply, SampledUse
from engine.runtime.outputs import Generation
from engine.serve.chat_request import ChatRequest
from engine.serve.tool_calls import parse_tool_calls

MAX_BYTES = 64 << 20
CallKey = tuple[str, str, Any]  # (id, name, arguments as parsed)


@dataclass(frozen=True)
class KeptReply:
    owner: str  # the client identity it was given to
    reply: SampledReply
    content: str  # the content the response gave out ("" for none)
    calls: tuple[CallKey, ...]

    @property
    def size(self) -> int:
        raw = sum(len(r) for r in self.reply.raw_calls.values())
        return len(self.reply.text) + len(self.content) + raw + 4 * len(self.reply.ids)


def message_calls(message: Message) -> list[CallKey]:
    """A message's tool calls as they are compared with a reply's."""
    out = []
    for call in message.get("tool_calls") or []:
        fn = call.get("function", call)
        out.append((call.get("id"), fn.get("name"), fn.get("arguments")))
    return out


class KeptReplies:
    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self.items: OrderedDict[str, KeptReply] = OrderedDict()  # request id -> its reply
        self.by_call: dict[str, str] = {}  # first call's id -> request id
        self.by_text: dict[
            tuple[str, str], str
        ] = {}  # (owner, content) of a reply without calls -> request id
        self.bytes = 0
        self.lock = threading.Lock()

    def keep(
        self, owner: str, reply: SampledReply, content: str, calls: Sequence[tuple[str, str, str]]
    ) -> None:
        """`calls`: (id, name, arguments as the model wrote them) of each call the response gave out."""
        keys = tuple((i, name, parse_arguments(arguments)) for i, name, arguments in calls)
        kept = KeptReply(owner, reply, content, keys)
        with self.lock:
            self.items[reply.request_id] = kept
            self.bytes += kept.size
            if keys:
                self.by_call[keys[0][0]] = reply.request_id
            else:
                self.by_text[(owner, content)] = reply.request_id
            while len(self.items) > 1 and self.bytes > self.max_bytes:
                self._forget(*self.items.popitem(last=False))

    def keep_answer(self, req: ChatRequest, gen: Generation) -> SampledReply:
        """A finished request's reply as sampled, kept for its client: its text, every token, and each tool
        call it gave out, by the id the response gave it, with the raw text the model wrote for it."""
        fmt = req.calls_format
        parsed = parse_tool_calls(gen.text, fmt) if fmt else None
        calls = [(req.call_id(i), c.name, c.arguments) for i, c in enumerate(parsed.calls if parsed else [])]
        raw = dict(zip((i for i, _, _ in calls), parsed.raw if parsed else [], strict=True))
        reply = SampledReply(req.request_id, gen.text, array("i", gen.token_ids), raw)
        self.keep(req.client.identity, reply, gen.text if parsed is None else parsed.content or "", calls)
        return reply

    def _forget(self, request_id: str, kept: KeptReply) -> None:
        self.bytes -= kept.size
        key = kept.calls[0][0] if kept.calls else (kept.owner, kept.content)
        index: dict[Any, str] = self.by_call if kept.calls else self.by_text
        if index.get(key) == request_id:  # not since replaced by a newer reply of the same key
            del index[key]

    def uses(
        self, owner: str, messages: Sequence[Message], tokens: bool
    ) -> tuple[tuple[SampledUse, ...], frozenset[str]]:
        """The assistant messages of a request of `owner` that are rendered from kept replies, and how
        (`tokens`: splice the sampled ids where the whole reply came back); and the replies (request ids)
        whose calls came back changed (another name, arguments, or calls), which the client edited."""
        out, edited = [], set()
        with self.lock:
            for i, m in enumerate(messages):
                if m["role"] != "assistant":
                    continue
                calls, content = message_calls(m), m.get("content") or ""
                found = self.by_call.get(calls[0][0]) if calls else self.by_text.get((owner, content))
                kept = self.items.get(found) if found is not None else None
                if kept is None or kept.owner != owner:
                    continue
                if tuple(calls) != kept.calls:
                    edited.add(kept.reply.request_id)
                    continue
                how = (TOKENS if tokens else TEXT) if content == kept.content else CALLS
                if how == TEXT and not calls:
                    continue  # a reply without calls renders as its content either way
                self.items.move_to_end(kept.reply.request_id)
                out.append(SampledUse(i, kept.reply, how))
        return tuple(out), frozenset(edited)
