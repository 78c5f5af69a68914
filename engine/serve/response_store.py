"""The responses this server keeps for `previous_response_id`: each response's whole conversation as Responses
input items (its input, with what an earlier response it continued held, then its output items), the
`capacity` most recent in memory (256 by default), the oldest forgotten first; a response made with
`store: false` is not kept, and none outlives the server. Used on the event loop only (parsing a request,
answering it), so no lock. A kept list shares its items with the list it extends: memory grows with the
number of items, not with their text."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

CAPACITY = 256


class ResponseStore:
    def __init__(self, capacity: int = CAPACITY) -> None:
        self.capacity = capacity
        self.items: OrderedDict[str, list[Any]] = OrderedDict()

    def get(self, response_id: str) -> list[Any] | None:
        """The conversation of a kept response, as input items (a new list: the caller may extend it)."""
        kept = self.items.get(response_id)
        if kept is None:
            return None
        self.items.move_to_end(response_id)
        return list(kept)

    def keep(self, response_id: str, conversation: list[Any]) -> None:
        self.items[response_id] = conversation
        self.items.move_to_end(response_id)
        while len(self.items) > self.capacity:
            self.items.popitem(last=False)
