"""The responses this server keeps for `previous_response_id`: each response's whole conversation as Responses
input items (its input, with what an earlier response it continued held, then its output items), and the
client identity that made it (engine/serve/client_session.py): only that identity continues it; to anyone
else it does not exist. The most recent are kept in memory, the oldest forgotten first, while there are more
than `capacity` (256) or their conversations take more than `max_bytes` (256 MiB; the newest is kept
whatever its size); a response made with `store: false` is not kept, and none outlives the server.

A conversation is held as its compact UTF-8 JSON, so what is counted is what is held; items no prompt
renders (`reasoning`, `web_search_call`: engine/traces/responses.py drops them) are not kept at all. Used
on the event loop only (parsing a request, answering it), so no lock."""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from engine.traces.response_chain import compact
from engine.traces.responses import rendered_items

CAPACITY = 256
MAX_BYTES = 256 << 20


@dataclass(frozen=True)
class Kept:
    owner: str  # the client identity that made the response
    conversation: bytes  # its input items, compact JSON


class ResponseStore:
    def __init__(self, capacity: int = CAPACITY, max_bytes: int = MAX_BYTES) -> None:
        self.capacity, self.max_bytes = capacity, max_bytes
        self.items: OrderedDict[str, Kept] = OrderedDict()
        self.bytes = 0  # of every conversation kept

    def get(self, response_id: str, owner: str) -> list[Any] | None:
        """The conversation of a response `owner` made and this server keeps, as input items (a new list);
        None for any other (unknown, forgotten, or another client's)."""
        kept = self.items.get(response_id)
        if kept is None or kept.owner != owner:
            return None
        self.items.move_to_end(response_id)
        return json.loads(kept.conversation)

    def keep(self, response_id: str, owner: str, conversation: list[Any]) -> None:
        data = compact(rendered_items(conversation))
        self.items[response_id] = Kept(owner, data)
        self.bytes += len(data)
        while len(self.items) > 1 and (len(self.items) > self.capacity or self.bytes > self.max_bytes):
            _, dropped = self.items.popitem(last=False)
            self.bytes -= len(dropped.conversation)
