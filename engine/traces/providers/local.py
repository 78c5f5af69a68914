"""The local engine's own prefix cache: the same `BlockManager` the engine uses (block size, chained hashes,
capacity, LRU eviction), driven the way a replay drives it, without a model.

Per request, as `Engine.generate` does: the prompt's cached full blocks are matched (never its last token),
blocks are taken for the rest (evicting as the cache's policy says), the prompt's full blocks are
published; then the reply's tokens after it are published as decoding them would have (as the replay
teacher-forces them). A request this project's server recorded with its engine steps (`ServedSteps`) is
served as that engine served it: looked up against what was published before the step that admitted it, its
blocks published after the steps that published them (so requests admitted in one step never read each
other's blocks, and one admitted while another was still computing reads what that one had published by
then); requests come in the order the engine admitted them (engine.traces.load). No price: the engine's
cost is the computed tokens. A request the model's context cannot hold (its prompt plus one new token, or
plus its reply), or whose prompt and reply the whole cache cannot hold, is refused as a replay refuses it:
nothing served, nothing stored.
"""

from __future__ import annotations

import heapq
import itertools

from engine.kv.block_manager import BlockManager
from engine.kv.sequence import SequenceState
from engine.traces.providers.base import RulePrompt, Served
from engine.traces.request import ServedSteps

# A publication the recorded engine made after a step: (its run, the step, the order it was noted in, the
# request's prompt and reply tokens, how many of them its published blocks held, its cache namespace).
Due = tuple[float, int, int, list[int], int, str]

OVER_CONTEXT = "over the model's"  # in a refusal's why_none: the context cannot hold the request
OVER_CACHE = "over the local cache's"  # the whole cache cannot hold its prompt and reply


class LocalRule:
    name = "local"

    def __init__(self, blocks: BlockManager, salt: str = "", context: int | None = None) -> None:
        self.blocks, self.salt, self.context = blocks, salt, context
        self.unit = blocks.block_size
        self.due: list[Due] = []  # a heap: publications of recorded steps not made yet
        self.noted = itertools.count()

    def _prefill(self, ids: list[int], salt: str) -> tuple[int, int]:
        """Admit, fill and publish `ids` as one request: (tokens served from cache, tokens now cached)."""
        seq = SequenceState(ids, salt=self.salt + salt)
        self.blocks.admit(seq)
        try:
            self.blocks.grow(seq, len(ids))
            seq.num_kv = len(ids)
            self.blocks.publish(seq)
        finally:
            self.blocks.release(seq)
        return seq.num_cached, len(seq.block_hashes) * self.blocks.block_size

    def _lookup(self, ids: list[int], salt: str) -> int:
        """The tokens of `ids` the cache serves now; nothing taken, nothing published."""
        seq = SequenceState(ids, salt=self.salt + salt)
        self.blocks.admit(seq)
        self.blocks.release(seq)
        return seq.num_cached

    def _publish_before(self, steps: ServedSteps | None) -> None:
        """Make the recorded publications of every step before the one that admitted `steps`' request (all of
        them before a request recorded without steps)."""
        while self.due and (steps is None or self.due[0][:2] < (steps.server, steps.admitted)):
            _, _, _, tokens, count, salt = heapq.heappop(self.due)
            self._prefill(tokens[:count], salt)

    def serve(self, prompt: RulePrompt) -> Served:
        ids = list(prompt.token_ids)
        need = len(ids) + max(1, len(prompt.reply_ids))  # what the replay's generate calls check
        if self.context is not None and need > self.context:
            return Served(0, why_none=f"refused: needs {need:,} tokens, {OVER_CONTEXT} {self.context:,}")
        held = len(ids) + max(0, len(prompt.reply_ids) - 1)  # the K/V its prompt and reply leave
        if self.blocks.blocks_for(held) > self.blocks.num_blocks:
            capacity = self.blocks.num_blocks * self.blocks.block_size
            return Served(0, why_none=f"refused: needs {held:,} tokens, {OVER_CACHE} {capacity:,}")
        below = len(ids) <= self.blocks.block_size
        steps = prompt.steps
        self._publish_before(steps)
        if steps is None:
            cached, stored = self._prefill(ids, prompt.cache_salt)
            if len(prompt.reply_ids) > 1:  # the reply's blocks, as decoding it publishes them
                stored = self._prefill(ids + list(prompt.reply_ids[:-1]), prompt.cache_salt)[1]
            return Served(cached, stored_tokens=stored, below_minimum=below)
        cached = self._lookup(ids, prompt.cache_salt)
        tokens = ids + list(prompt.reply_ids[:-1])
        for step, count in steps.published:
            heapq.heappush(self.due, (steps.server, step, next(self.noted), tokens, count, prompt.cache_salt))
        published = max((count for _, count in steps.published), default=cached)
        stored = min(published, len(tokens)) // self.unit * self.unit
        return Served(cached, stored_tokens=max(stored, cached), below_minimum=below)
