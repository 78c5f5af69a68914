"""The local engine's own prefix cache: the same `BlockManager` the engine uses (block size, chained hashes,
capacity, LRU eviction), driven the way a replay drives it, without a model.

Per request, as `Engine.generate` does: the prompt's cached full blocks are matched (never its last token),
blocks are taken for the rest (evicting as the cache's policy says), the prompt's full blocks are
published; then the reply's tokens after it are published as decoding them would have (as the replay
teacher-forces them). No price: the engine's cost is the computed tokens. A request the model's context
cannot hold (its prompt plus one new token, or plus its reply), or whose prompt and reply the whole cache
cannot hold, is refused as a replay refuses it: nothing served, nothing stored.
"""

from __future__ import annotations

from engine.kv.block_manager import BlockManager
from engine.kv.sequence import SequenceState
from engine.traces.providers.base import RulePrompt, Served

OVER_CONTEXT = "over the model's"  # in a refusal's why_none: the context cannot hold the request
OVER_CACHE = "over the local cache's"  # the whole cache cannot hold its prompt and reply


class LocalRule:
    name = "local"

    def __init__(self, blocks: BlockManager, salt: str = "", context: int | None = None) -> None:
        self.blocks, self.salt, self.context = blocks, salt, context
        self.unit = blocks.block_size

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

    def serve(self, prompt: RulePrompt) -> Served:
        ids = list(prompt.token_ids)
        need = len(ids) + max(1, len(prompt.reply_ids))  # what the replay's generate calls check
        if self.context is not None and need > self.context:
            return Served(0, why_none=f"refused: needs {need:,} tokens, {OVER_CONTEXT} {self.context:,}")
        held = len(ids) + max(0, len(prompt.reply_ids) - 1)  # the K/V its prompt and reply leave
        if self.blocks.blocks_for(held) > self.blocks.num_blocks:
            capacity = self.blocks.num_blocks * self.blocks.block_size
            return Served(0, why_none=f"refused: needs {held:,} tokens, {OVER_CACHE} {capacity:,}")
        cached, stored = self._prefill(ids, prompt.cache_salt)
        if len(prompt.reply_ids) > 1:  # the reply's blocks, as decoding it publishes them
            stored = self._prefill(ids + list(prompt.reply_ids[:-1]), prompt.cache_salt)[1]
        return Served(cached, stored_tokens=stored, below_minimum=len(ids) <= self.blocks.block_size)
