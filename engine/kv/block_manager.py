"""`BlockManager`: which KV block holds which tokens, and which full blocks can be reused by hash.

Invariants (checked by the property test in tests/kv/test_block_manager.py):
- every block is either referenced (ref_count > 0) or free, never both; free blocks are empty (never used,
  or released without a hash: reused first) or cached (hashed: reusable by a later request, evicted in LRU
  order when an empty one is needed and none is left);
- a block is evictable only when its ref count is 0;
- `table[h] == b` implies `blocks[b].hash == h` and block b holds the tokens that hash to h, under the
  parent hash it records; `by_content` holds the same blocks under what their hashes are computed from
  (parent hash, tokens, and vLLM's cache_salt where it enters a chain's first block), so `match` finds a
  cached prefix without hashing it: only blocks that are published are hashed, once each;
- only full blocks are hashed; hashes chain: h_i = H(h_{i-1}, tokens of block i), with
  h_{-1} = H(namespace, salt) where the namespace carries the weights digest and dtype; or, after
  `use_vllm_hash`, vLLM's hashes (engine/kv/vllm_hash.py: the salt in the first block's hash).

Listeners (`listeners`, empty unless a server publishes KV events: engine/serve/kv_events.py) are called on
the thread that changes the cache, after the change: `("stored", [(hash, parent, token_ids, salt), ...])`
for the blocks one `publish` entered in the table, in chain order (parent None for a chain's first block;
`salt` the sequence's); `("removed", [(hash, salt)])` for an evicted block; `("cleared", [])` on `reset`.

The pool is lazy: a block that was never used has no object, so a what-if cache of any size costs only what
its requests touch. Growing a sequence takes free blocks and never fails halfway: it either covers the asked
positions or raises before changing anything (whoever runs several sequences decides what to preempt).
"""

from __future__ import annotations

import hashlib
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass

from engine.errors import CacheCapacityError, InvalidArgumentError
from engine.kv.sequence import SequenceState
from engine.kv.vllm_hash import VllmBlockHash


def token_bytes(tokens: Iterable[int]) -> bytes:
    """Token ids as the bytes that are hashed: 8 per token (int64, native order)."""
    return array("q", tokens).tobytes()


def chain_hash(parent: bytes, block: bytes) -> bytes:
    """128-bit BLAKE2b of the parent hash and the block's token ids (as `token_bytes`)."""
    return hashlib.blake2b(parent + block, digest_size=16).digest()


TAG = 8  # bytes of a cache's tag before each vLLM hash


def cache_tag(cache: str) -> bytes:
    return hashlib.blake2b(cache.encode(), digest_size=TAG).digest()


def whole_salt(salt: str) -> tuple[str, str | None]:
    """One cache; the salt is vLLM's cache_salt (none when empty)."""
    return "", salt or None


@dataclass
class Block:
    id: int
    ref_count: int = 0
    hash: bytes | None = None
    parent: bytes = b""  # the hash of the block before it in its chain
    token_ids: tuple[int, ...] = ()
    salt: str = ""  # the namespace it was hashed under
    salt_key: str | None = None  # vLLM's cache_salt, where it entered the hash (a chain's first block)


@dataclass
class CacheStats:
    lookups: int = 0
    hit_tokens: int = 0
    miss_tokens: int = 0
    evictions: int = 0
    collisions: int = 0  # a published block whose hash a block of other content holds: not entered


class BlockManager:
    def __init__(self, num_blocks: int, block_size: int, namespace: bytes) -> None:
        if num_blocks < 1 or block_size < 1:
            raise CacheCapacityError(
                f"the KV cache needs at least one block (got {num_blocks} of {block_size} tokens)"
            )
        self.num_blocks, self.block_size, self.namespace = num_blocks, block_size, namespace
        self.blocks: dict[int, Block] = {}  # only blocks that were ever used
        self.table: dict[bytes, int] = {}
        self.by_content: dict[tuple[bytes, tuple[int, ...], str | None], int] = {}
        # Free blocks, in the order they are taken: released empty ones (last released first), then the
        # never-used ids from `next_fresh` up, then cached ones in LRU order (evicting them).
        self.empty: list[int] = []
        self.next_fresh = 0
        self.cached: OrderedDict[int, None] = OrderedDict()
        self.stats = CacheStats()
        self.listeners: list[Callable[[str, list], None]] = []
        self.vllm: VllmBlockHash | None = None
        self.salt_parts: Callable[[str], tuple[str, str | None]] = whole_salt

    def use_vllm_hash(
        self, vllm: VllmBlockHash | None, salt_parts: Callable[[str], tuple[str, str | None]] = whole_salt
    ) -> None:
        """Hash blocks as vLLM does (None: the engine's own chain hash); only while the table is empty.
        `salt_parts` splits a salt into the cache it names (a served model: its own tag before each vLLM
        hash, so equal hashes of two caches never meet in the table) and vLLM's `cache_salt` within it."""
        if self.table:
            raise InvalidArgumentError("the prefix hash can only change while the cache is empty")
        self.vllm, self.salt_parts = vllm, salt_parts

    @property
    def num_free(self) -> int:
        return len(self.empty) + (self.num_blocks - self.next_fresh) + len(self.cached)

    def blocks_for(self, num_tokens: int) -> int:
        return -(-num_tokens // self.block_size)

    def root(self, salt: str) -> bytes:
        """The parent of a chain's first block."""
        if self.vllm is not None:
            return cache_tag(self.salt_parts(salt)[0]) + self.vllm.none_hash
        return hashlib.blake2b(self.namespace + b"\0salt:" + salt.encode(), digest_size=16).digest()

    def block_hash(self, parent: bytes, tokens: tuple[int, ...], index: int, salt: str) -> bytes:
        """The hash of block `index` of a sequence under `salt`, after `parent`."""
        if self.vllm is None:
            return chain_hash(parent, token_bytes(tokens))
        return parent[:TAG] + self.vllm.block(parent[TAG:], tokens, self.salt_key(salt, index))

    def salt_key(self, salt: str, index: int) -> str | None:
        """What of `salt` enters block `index`'s hash besides its parent: vLLM's cache_salt in a chain's first
        block (the engine's own hashes carry the salt in the chain's root)."""
        return (self.salt_parts(salt)[1] or None) if self.vllm is not None and index == 0 else None

    def match(self, token_ids: list[int], salt: str = "") -> tuple[list[int], list[bytes]]:
        """Blocks and hashes of the longest cached prefix of full blocks of `token_ids[:-1]`, found by content
        (`by_content`): a cached block's hash is the one it was published under, never recomputed.

        The last token is never matched: its logits are needed, so at least it is recomputed.
        """
        bs, parent, first = self.block_size, self.root(salt), self.salt_key(salt, 0)
        ids: list[int] = []
        hashes: list[bytes] = []
        for i in range((len(token_ids) - 1) // bs):
            tokens = tuple(token_ids[i * bs : (i + 1) * bs])
            block_id = self.by_content.get((parent, tokens, first if i == 0 else None))
            if block_id is None:
                break
            h = self.blocks[block_id].hash
            assert h is not None
            ids.append(block_id)
            hashes.append(h)
            parent = h
        return ids, hashes

    def admit(
        self, seq: SequenceState, use_cache: bool = True, matched: tuple[list[int], list[bytes]] | None = None
    ) -> None:
        """Reference the cached prefix of `seq` (none without `use_cache`; `matched`: what `match` found for
        it just before): its K/V need no computing."""
        if matched is None:
            matched = self.match(seq.token_ids, seq.salt) if use_cache else ([], [])
        hits, hashes = matched
        for b in hits:
            self._ref(b)
        seq.block_table, seq.block_hashes = list(hits), list(hashes)
        seq.num_cached = seq.num_kv = len(hits) * self.block_size
        if use_cache:
            self.stats.lookups += 1
            self.stats.hit_tokens += seq.num_kv
            self.stats.miss_tokens += len(seq) - seq.num_kv

    def fits(self, hits: list[int], num_tokens: int) -> bool:
        """Whether a sequence admitted with these prefix hits can then cover `num_tokens` positions."""
        free_hits = sum(1 for b in hits if self.blocks[b].ref_count == 0)  # referencing them takes them
        return self.blocks_for(num_tokens) - len(hits) <= self.num_free - free_hits

    def can_grow(self, seq: SequenceState, num_tokens: int) -> bool:
        return self.blocks_for(num_tokens) - len(seq.block_table) <= self.num_free

    def grow(self, seq: SequenceState, num_tokens: int) -> None:
        """Make the block table cover positions [0, num_tokens), evicting cached blocks as needed; raises
        CacheCapacityError, changing nothing, when too few blocks are free. The blocks taken go into the
        table in ascending ids: blocks freed together come back consecutive (a released sequence's cached
        blocks are evicted tail first, in descending order), which attention reads in place."""
        needed = self.blocks_for(num_tokens) - len(seq.block_table)
        if needed > self.num_free:
            raise CacheCapacityError(
                f"the KV cache has {self.num_free} free blocks of {self.num_blocks}; covering {num_tokens} "
                f"tokens needs {needed} more ({self.block_size} tokens per block)"
            )
        taken = []
        for _ in range(needed):
            block = self._block(self._take_free())
            self._evict(block)
            block.ref_count = 1
            taken.append(block.id)
        seq.block_table += sorted(taken)

    def publish(self, seq: SequenceState, enter: bool = True) -> None:
        """Hash every full block of `seq` whose K/V are written and enter it in the table (`enter=False`: the
        same hashing, nothing entered: a request kept out of the cache, its blocks empty when released)."""
        bs, stored = self.block_size, []
        for i in range(len(seq.block_hashes), seq.num_kv // bs):
            tokens = tuple(seq.token_ids[i * bs : (i + 1) * bs])
            parent = seq.block_hashes[-1] if seq.block_hashes else self.root(seq.salt)
            h = self.block_hash(parent, tokens, i, seq.salt)
            seq.block_hashes.append(h)
            block, salt_key = self.blocks[seq.block_table[i]], self.salt_key(seq.salt, i)
            # if an equal block is cached already, that one stays the cached copy; a block of other content
            # under the same hash (a collision) is never entered, so never served
            if enter and h in self.table:
                held = self.blocks[self.table[h]]
                content = (held.parent, held.token_ids, held.salt_key)
                self.stats.collisions += content != (parent, tokens, salt_key)
            elif enter:
                seq.num_written += bs if (i + 1) * bs <= seq.num_prompt else 0
                self.table[h] = block.id
                self.by_content[parent, tokens, salt_key] = block.id
                block.hash, block.parent, block.token_ids = h, parent, tokens
                block.salt, block.salt_key = seq.salt, salt_key
                if self.listeners:
                    stored.append((h, parent if i else None, tokens, seq.salt))
        if stored:
            self._emit("stored", stored)

    def release(self, seq: SequenceState) -> None:
        """Drop the sequence's references. Hashed blocks stay cached (the sequence's last block nearest
        eviction); unhashed ones are empty again, to be reused first."""
        for block_id in reversed(seq.block_table):
            block = self.blocks[block_id]
            block.ref_count -= 1
            if block.ref_count == 0:
                self._freed(block)
        seq.block_table = []

    def reset(self) -> None:
        """Forget every cached block. Only valid when no sequence holds blocks."""
        assert all(b.ref_count == 0 for b in self.blocks.values()), "reset while blocks are referenced"
        self.blocks.clear()
        self.table.clear()
        self.by_content.clear()
        self.empty, self.next_fresh, self.cached = [], 0, OrderedDict()
        self._emit("cleared", [])

    def index(self) -> list[tuple[bytes, bytes | None, tuple[int, ...]]]:
        """Every block the table can serve: (hash, parent hash or None for a chain's first block, token ids)."""
        out = []
        for h, b in self.table.items():
            block = self.blocks[b]
            first = block.parent == self.root(block.salt)
            out.append((h, None if first else block.parent, block.token_ids))
        return out

    def usage(self) -> dict[str, int]:
        """Stats plus the current split of blocks: in use, cached (free but reusable), empty."""
        return asdict(self.stats) | {
            "blocks_total": self.num_blocks,
            "blocks_in_use": self.num_blocks - self.num_free,
            "blocks_cached": len(self.cached),
            "blocks_free": self.num_free - len(self.cached),
        }

    # ---- the free blocks and the eviction policy (subclasses may choose another victim) ----------------
    def _take_free(self) -> int:
        """The free block to fill next: an empty one, else the cached one `_victim` names."""
        if self.empty:
            return self.empty.pop()
        if self.next_fresh < self.num_blocks:
            self.next_fresh += 1
            return self.next_fresh - 1
        victim = self._victim()
        del self.cached[victim]
        return victim

    def _victim(self) -> int:
        """Which cached block to evict: the least recently used (LRU)."""
        return next(iter(self.cached))

    def _freed(self, block: Block) -> None:
        if block.hash is None:
            self.empty.append(block.id)
        else:
            self.cached[block.id] = None

    def _block(self, block_id: int) -> Block:
        block = self.blocks.get(block_id)
        if block is None:
            block = self.blocks[block_id] = Block(block_id)
        return block

    def _ref(self, block_id: int) -> None:
        block = self.blocks[block_id]
        if block.ref_count == 0:
            del self.cached[block_id]  # a referenced prefix hit is always a cached block
        block.ref_count += 1

    def _evict(self, block: Block) -> None:
        if block.hash is not None:
            del self.table[block.hash]
            del self.by_content[block.parent, block.token_ids, block.salt_key]
            self.stats.evictions += 1
            self._emit("removed", [(block.hash, block.salt)])
            block.hash, block.parent, block.token_ids, block.salt_key = None, b"", (), None

    def _emit(self, kind: str, items: list) -> None:
        for listener in self.listeners:
            listener(kind, items)
