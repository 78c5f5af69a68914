"""Which session a request belongs to, and the earlier request its miss is explained against.

Every request has a client identity (engine/serve/client_session.py) and nothing here crosses one: a
request is compared with, and joins, only requests of its own identity.

The store retains finished requests (their prompt + reply tokens): the latest `RETAIN_REQUESTS`, at most
`RETAIN_TOKENS` tokens in all, none older than `RETAIN_S`. A request's previous request is the retained
request of its identity whose prompt + reply shares the longest token prefix with its prompt (what the
cache could serve it best): one of its own session always counts, one of another session only when it
shares more than the template's preamble (what every prompt of this chat template starts with, e.g.
SmolLM2's default system prompt); on a tie its own session's, then the latest. So a new session's first
request (a second run of an agent) is compared with the closest earlier prompt of its client, and a
session that interleaves side requests (a title, a subagent) is compared with the request it extends.

The session is the one the client named; else that of the previous request (`matched`); else a new one,
`auto-N` (`new`).
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engine.prompts.regions import common_prefix
from engine.serve.miss_reason import PastRequest, token_array

RETAIN_REQUESTS = 512
RETAIN_TOKENS = 16 << 20  # 64 MiB of token ids
RETAIN_S = 6 * 3600.0


@dataclass(frozen=True)
class SessionMatch:
    session: str
    source: str  # where the client named it (engine/serve/client_session.py) | previous_response_id | matched | new
    previous: PastRequest | None


@dataclass(frozen=True)
class _Held:
    past: PastRequest
    when: float


class SessionStore:
    def __init__(
        self,
        preamble_tokens: int,
        max_requests: int = RETAIN_REQUESTS,
        max_tokens: int = RETAIN_TOKENS,
        max_age_s: float = RETAIN_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.preamble = preamble_tokens
        self.max_requests, self.max_tokens, self.max_age_s, self.clock = (
            max_requests,
            max_tokens,
            max_age_s,
            clock,
        )
        self.held: deque[_Held] = deque()  # oldest first
        self.tokens = 0
        self._auto = itertools.count(1)

    def resolve(
        self,
        identity: str,
        named: str | None,
        source: str,
        prompt_ids: Sequence[int],
        continues: str | None = None,
    ) -> SessionMatch:
        """The request's session and the earlier request of the same client it is compared with.
        `continues`: the id of the response a Responses request continues (`previous_response_id`); while
        that request is held it is the one compared with, whatever changed (a dropped system prompt), and its
        session is kept unless the client names another."""
        self._expire()
        held = (
            next((h.past for h in self.held if h.past.request_id == continues), None) if continues else None
        )
        if held is not None and held.identity == identity:
            return SessionMatch(named or held.session, source if named else "previous_response_id", held)
        ids = token_array(prompt_ids)
        best, best_key = None, (-1, False)
        for h in reversed(self.held):  # newest first: `>` keeps the latest of equals
            if h.past.identity != identity:
                continue
            own = named is not None and h.past.session == named
            shared = common_prefix(ids, h.past.cached_ids)
            if (own or shared > self.preamble) and (shared, own) > best_key:
                best, best_key = h.past, (shared, own)
        if named is not None:
            return SessionMatch(named, source, best)
        if best is None:
            return SessionMatch(f"auto-{next(self._auto)}", "new", None)
        return SessionMatch(best.session, "matched", best)

    def remember(self, past: PastRequest) -> None:
        self.held.append(_Held(past, self.clock()))
        self.tokens += len(past.cached_ids)
        self._expire()

    def _expire(self) -> None:
        """Drop the oldest requests beyond the bounds (count, tokens, age)."""
        horizon = self.clock() - self.max_age_s
        while self.held and (
            len(self.held) > self.max_requests or self.tokens > self.max_tokens or self.held[0].when < horizon
        ):
            self.tokens -= len(self.held.popleft().past.cached_ids)
