"""`BlockManager`: which KV block holds which tokens, and which full blocks can be reused by hash.

Invariants (checked by the property test in tests/kv/test_block_manager.py):
- every block is either referenced (ref_count > 0) or in the free queue, never both;
- `reserved` free blocks are promised to admitted sequences (`len(free) >= reserved`): a sequence can always
  grow to the size it was admitted for, however many others are live;
- a block is evictable only when its ref count is 0; eviction takes the least recently used free block;
- `table[h] == b` implies `blocks[b].hash == h` and block b holds the tokens that hash to h;
- only full blocks are hashed; hashes chain: h_i = H(h_{i-1}, tokens of block i), with
  h_{-1} = H(namespace, salt) where the namespace carries the weights digest and dtype.
"""

from __future__ import annotations

import hashlib
from array import array
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import asdict, dataclass

from engine.errors import CacheCapacityError
from engine.kv.sequence import SequenceState


def token_bytes(tokens: Iterable[int]) -> bytes:
    """Token ids as the bytes that are hashed: 8 per token (int64, native order)."""
    return array("q", tokens).tobytes()


def chain_hash(parent: bytes, block: bytes) -> bytes:
    """128-bit BLAKE2b of the parent hash and the block's token ids (as `token_bytes`)."""
    return hashlib.blake2b(parent + block, digest_size=16).digest()


@dataclass
class Block:
    id: int
    ref_count: int = 0
    hash: bytes | None = None
    token_ids: tuple[int, ...] = ()


@dataclass
class CacheStats:
    lookups: int = 0
    hit_tokens: int = 0
    miss_tokens: int = 0
    evictions: int = 0
    collisions: int = 0  # hash matched but tokens differed: served as a miss


class BlockManager:
    def __init__(self, num_blocks: int, block_size: int, namespace: bytes) -> None:
        if num_blocks < 1 or block_size < 1:
            raise CacheCapacityError(
                f"the KV cache needs at least one block (got {num_blocks} of {block_size} tokens)"
            )
        self.block_size = block_size
        self.namespace = namespace
        self.blocks = [Block(i) for i in range(num_blocks)]
        # Free blocks in LRU order: the first is reused (and, if it holds a hash, evicted) first. O(1) ops.
        self.free: OrderedDict[int, None] = OrderedDict.fromkeys(range(num_blocks))
        self.table: dict[bytes, int] = {}
        self.reserved = 0  # the sum of live sequences' `reserved`
        self.stats = CacheStats()

    @property
    def num_blocks(self) -> int:
        return len(self.blocks)

    def root(self, salt: str) -> bytes:
        return hashlib.blake2b(self.namespace + b"\0salt:" + salt.encode(), digest_size=16).digest()

    def match(self, token_ids: list[int], salt: str = "") -> tuple[list[int], list[bytes]]:
        """Blocks and hashes of the longest cached prefix of full blocks of `token_ids[:-1]`.

        The last token is never matched: its logits are needed, so at least it is recomputed.
        """
        bs, parent = self.block_size, self.root(salt)
        n = (len(token_ids) - 1) // bs
        data, width = token_bytes(token_ids[: n * bs]), 8 * bs
        ids: list[int] = []
        hashes: list[bytes] = []
        for i in range(n):
            parent = chain_hash(parent, data[i * width : (i + 1) * width])
            block_id = self.table.get(parent)
            if block_id is None:
                break
            tokens = tuple(token_ids[i * bs : (i + 1) * bs])
            if self.blocks[block_id].token_ids != tokens:  # a hash collision: never serve wrong K/V
                self.stats.collisions += 1
                break
            ids.append(block_id)
            hashes.append(parent)
        return ids, hashes

    def admit(self, seq: SequenceState, max_tokens: int, use_cache: bool = True) -> None:
        """Reference the cached prefix of `seq` and reserve the blocks for `max_tokens` positions.

        Refuses (CacheCapacityError) before changing anything if the blocks cannot be found even by
        evicting every unreferenced block that no other sequence has reserved.
        """
        hits, hashes = self.match(seq.token_ids, seq.salt) if use_cache else ([], [])
        needed = -(-max_tokens // self.block_size) - len(hits)
        available = len(self.free) - self.reserved - sum(1 for b in hits if self.blocks[b].ref_count == 0)
        if needed > available:
            in_use = self.num_blocks - len(self.free)
            raise CacheCapacityError(
                f"request needs {needed} more KV blocks ({max_tokens} tokens at {self.block_size} per block) "
                f"but only {available} of {self.num_blocks} can be freed ({in_use} are in use, {self.reserved} "
                "promised to running requests); "
                "raise cache_tokens/cache_gb or shorten the request"
            )
        for b in hits:
            self._ref(b)
        seq.block_table, seq.block_hashes = list(hits), list(hashes)
        seq.reserved = max(needed, 0)
        self.reserved += seq.reserved
        seq.num_cached = seq.num_kv = len(hits) * self.block_size
        if use_cache:
            self.stats.lookups += 1
            self.stats.hit_tokens += seq.num_cached
            self.stats.miss_tokens += len(seq) - seq.num_cached

    def grow(self, seq: SequenceState, num_tokens: int) -> None:
        """Make the block table cover positions [0, num_tokens), from the sequence's reservation first."""
        while len(seq.block_table) * self.block_size < num_tokens:
            if seq.reserved:
                seq.reserved -= 1
                self.reserved -= 1
            elif len(self.free) <= self.reserved:
                raise CacheCapacityError(
                    "the KV cache ran out of blocks while growing a sequence past the size it was admitted for"
                )
            block_id = self._take_free()
            self._evict(block_id)
            self.blocks[block_id].ref_count = 1
            seq.block_table.append(block_id)

    def publish(self, seq: SequenceState) -> None:
        """Hash every full block of `seq` whose K/V are written and enter it in the table."""
        bs = self.block_size
        for i in range(len(seq.block_hashes), seq.num_kv // bs):
            tokens = tuple(seq.token_ids[i * bs : (i + 1) * bs])
            parent = seq.block_hashes[-1] if seq.block_hashes else self.root(seq.salt)
            h = chain_hash(parent, token_bytes(tokens))
            seq.block_hashes.append(h)
            block = self.blocks[seq.block_table[i]]
            if h not in self.table:  # if an equal block is cached already, that one stays the cached copy
                self.table[h] = block.id
                block.hash, block.token_ids = h, tokens

    def release(self, seq: SequenceState) -> None:
        """Drop the sequence's references. Hashed blocks stay cached (tail of the LRU queue, the
        sequence's last block nearest eviction); unhashed ones go to the front, to be reused first."""
        for block_id in reversed(seq.block_table):
            block = self.blocks[block_id]
            block.ref_count -= 1
            if block.ref_count == 0:
                self.free[block_id] = None
                if block.hash is None:
                    self.free.move_to_end(block_id, last=False)
        seq.block_table = []
        self.reserved -= seq.reserved
        seq.reserved = 0

    def reset(self) -> None:
        """Forget every cached block. Only valid when no sequence holds blocks."""
        assert all(b.ref_count == 0 for b in self.blocks), "reset while blocks are referenced"
        for block in self.blocks:
            block.hash, block.token_ids = None, ()
        self.table.clear()
        self.free = OrderedDict.fromkeys(range(self.num_blocks))

    def usage(self) -> dict[str, int]:
        """Stats plus the current split of blocks: in use, cached (free but reusable), empty."""
        cached = sum(1 for b in self.free if self.blocks[b].hash is not None)
        return asdict(self.stats) | {
            "blocks_total": self.num_blocks,
            "blocks_in_use": self.num_blocks - len(self.free),
            "blocks_cached": cached,
            "blocks_free": len(self.free) - cached,
        }

    def _take_free(self) -> int:
        """The free block to fill next: the least recently used (eviction policy: LRU)."""
        return self.free.popitem(last=False)[0]

    def _ref(self, block_id: int) -> None:
        block = self.blocks[block_id]
        if block.ref_count == 0:
            del self.free[block_id]
        block.ref_count += 1

    def _evict(self, block_id: int) -> None:
        block = self.blocks[block_id]
        if block.hash is not None:
            del self.table[block.hash]
            self.stats.evictions += 1
            block.hash, block.token_ids = None, ()
