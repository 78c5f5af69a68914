"""Which session a request belongs to, and the earlier request it is compared with.

A session is the id the client names (the X-Session-Id header, OpenAI's `user`, Anthropic's
`metadata.user_id`); the previous request is then that session's latest. A request that names none joins
the session of the earlier request it extends most: among every session's latest request, the one whose
prompt + reply shares the longest token prefix with this prompt (the later one on a tie), provided that
prefix is longer than the template's preamble (what every prompt of this chat template starts with, e.g.
SmolLM2's default system prompt); else it starts a session of its own (`auto-N`). So a second conversation
that shares a custom system prompt with the first joins it, and its miss shows where they part.

Each session's latest request is kept for the server's lifetime (its token ids: memory grows with the
number of sessions).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from engine.prompts.regions import common_prefix
from engine.serve.miss_reason import PastRequest


@dataclass(frozen=True)
class SessionMatch:
    session: str
    source: str  # header | user | metadata.user_id | matched | new
    previous: PastRequest | None


class SessionStore:
    def __init__(self, preamble_tokens: int) -> None:
        self.preamble = preamble_tokens
        self.latest: dict[str, PastRequest] = {}  # session -> its latest finished request, oldest first
        self._auto = itertools.count(1)

    def resolve(self, explicit: str | None, source: str, prompt_ids: Sequence[int]) -> SessionMatch:
        if explicit is not None:
            return SessionMatch(explicit, source, self.latest.get(explicit))
        best, best_shared = None, self.preamble
        for past in self.latest.values():  # oldest first: `>=` keeps the latest of equals
            shared = common_prefix(prompt_ids, past.cached_ids)
            if shared >= best_shared and shared > self.preamble:
                best, best_shared = past, shared
        if best is None:
            return SessionMatch(f"auto-{next(self._auto)}", "new", None)
        return SessionMatch(best.session, "matched", best)

    def remember(self, past: PastRequest) -> None:
        self.latest.pop(past.session, None)  # re-inserted last: the dict stays in order of recency
        self.latest[past.session] = past
