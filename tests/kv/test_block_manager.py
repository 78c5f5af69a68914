"""BlockManager invariants under long random sequences of admit / grow / publish / release / match; LRU order,
usage counts, growth that never fails halfway, the lazy pool and the complete collision guard."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import CacheCapacityError
from engine.kv import block_manager
from engine.kv.block_manager import BlockManager, chain_hash, token_bytes
from engine.kv.sequence import SequenceState
from engine.kv.vllm_hash import VllmBlockHash

NUM_BLOCKS, BS = 12, 4


def free_blocks(bm: BlockManager) -> list[int]:
    return [*bm.empty, *range(bm.next_fresh, bm.num_blocks), *bm.cached]


def check_invariants(bm: BlockManager) -> None:
    referenced = {b.id for b in bm.blocks.values() if b.ref_count > 0}
    free = free_blocks(bm)
    assert all(b.ref_count >= 0 for b in bm.blocks.values())
    assert len(set(free)) == len(free) == bm.num_free  # each free block once
    assert referenced.isdisjoint(free)  # no block both free and referenced
    assert len(referenced) + len(free) == bm.num_blocks  # free + used = capacity
    assert all(bm.blocks[b].hash is None for b in bm.empty)  # empty blocks hold nothing reusable
    assert all(bm.blocks[b].hash is not None for b in bm.cached)  # cached ones can be found again
    for h, block_id in bm.table.items():
        block = bm.blocks[block_id]
        assert (
            block.hash == h
            and len(block.token_ids) == BS
            and chain_hash(block.parent, token_bytes(block.token_ids)) == h
        )
    for block in bm.blocks.values():  # a hashed block is always findable by its hash
        assert block.hash is None or bm.table[block.hash] == block.id
    # ... and by its content, which is what a lookup reads
    assert len(bm.by_content) == len(bm.table)
    for (parent, tokens, salt_key), block_id in bm.by_content.items():
        block = bm.blocks[block_id]
        assert (block.parent, block.token_ids, block.salt_key) == (parent, tokens, salt_key)


def chain_ok(bm: BlockManager, seq: SequenceState) -> None:
    """Every published block of a live sequence is stored under the hash of its chain."""
    parent = bm.root(seq.salt)
    for i, h in enumerate(seq.block_hashes):
        parent = chain_hash(parent, token_bytes(seq.token_ids[i * BS : (i + 1) * BS]))
        assert parent == h


# Prompts drawn from a small alphabet with shared prefixes, so that hits, misses and evictions all happen.
prompt = st.lists(st.integers(0, 2), min_size=1, max_size=30)
op = st.one_of(
    st.tuples(st.just("admit"), prompt, st.integers(0, 10), st.sampled_from(["", "s"])),
    st.tuples(st.just("decode"), st.integers(0, 5), st.integers(1, 6)),
    st.tuples(st.just("release"), st.integers(0, 5)),
    st.tuples(st.just("match"), prompt),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(op, min_size=1, max_size=60))
def test_invariants_hold(ops) -> None:
    bm = BlockManager(NUM_BLOCKS, BS, b"ns")
    live: list[tuple[SequenceState, int]] = []  # (sequence, max tokens it was admitted for)
    for step in ops:
        if step[0] == "admit":
            _, toks, extra, salt = step
            seq = SequenceState(list(toks), salt=salt)
            matched = bm.match(seq.token_ids, salt)
            if not bm.fits(matched[0], len(toks) + extra):
                continue
            bm.admit(seq, True, matched)
            assert seq.num_cached % BS == 0 and seq.num_cached < len(toks)
            for i, block_id in enumerate(seq.block_table):  # a hit holds exactly the prompt's tokens
                assert bm.blocks[block_id].token_ids == tuple(toks[i * BS : (i + 1) * BS])
            assert bm.can_grow(seq, len(toks) + extra)  # what `fits` promised
            bm.grow(seq, len(toks))
            seq.num_kv = len(toks)
            bm.publish(seq)
            live.append((seq, len(toks) + extra))
        elif step[0] == "decode" and live:
            seq, limit = live[step[1] % len(live)]
            for _ in range(min(step[2], limit - len(seq))):
                if not bm.can_grow(seq, seq.num_kv + 1):
                    with pytest.raises(CacheCapacityError):  # refused whole, nothing changed
                        bm.grow(seq, seq.num_kv + 1)
                    break
                seq.token_ids.append(len(seq) % 3)
                bm.grow(seq, seq.num_kv + 1)
                seq.num_kv += 1
                bm.publish(seq)
        elif step[0] == "release" and live:
            seq, _ = live.pop(step[1] % len(live))
            bm.release(seq)
        elif step[0] == "match":
            ids, hashes = bm.match(list(step[1]))
            assert len(ids) == len(hashes) and len(ids) * BS < len(step[1])
        check_invariants(bm)
        for seq, _ in live:
            chain_ok(bm, seq)
    for seq, _ in live:
        bm.release(seq)
    check_invariants(bm)
    assert bm.num_free == NUM_BLOCKS


def test_lru_evicts_least_recently_used_first() -> None:
    bm = BlockManager(4, BS, b"ns")
    a, b = SequenceState([1] * 9), SequenceState([2] * 9)
    for seq in (a, b):
        bm.admit(seq)
        bm.grow(seq, 8)
        seq.num_kv = 8
        bm.publish(seq)
        bm.release(seq)
    touch = SequenceState([1] * 9)
    bm.admit(touch)  # touch a: b is now least recently used
    bm.release(touch)
    c = SequenceState([3] * 9)
    bm.admit(c)
    bm.grow(c, 8)
    assert bm.match([2] * 9)[0] == []  # b's blocks were the ones evicted
    assert bm.usage()["evictions"] == 2


def test_usage_counts() -> None:
    bm = BlockManager(8, BS, b"ns")
    seq = SequenceState(list(range(10)))
    bm.admit(seq)
    bm.grow(seq, 10)
    seq.num_kv = 10
    bm.publish(seq)
    u = bm.usage()
    assert (u["lookups"], u["hit_tokens"], u["miss_tokens"], u["blocks_in_use"]) == (1, 0, 10, 3)
    bm.release(seq)
    u = bm.usage()
    assert (u["blocks_in_use"], u["blocks_cached"], u["blocks_free"]) == (0, 2, 6)


def test_refuses_zero_capacity() -> None:
    with pytest.raises(CacheCapacityError):
        BlockManager(0, BS, b"ns")


def test_growth_is_refused_whole_when_too_few_blocks_are_free() -> None:
    bm = BlockManager(4, BS, b"ns")
    a = SequenceState([1] * 9)
    bm.admit(a)
    bm.grow(a, 9)  # 3 blocks
    b = SequenceState([2] * 9)
    bm.admit(b)
    assert not bm.can_grow(b, 8) and bm.can_grow(b, 4)
    with pytest.raises(CacheCapacityError, match="has 1 free blocks of 4; covering 8 tokens needs 2 more"):
        bm.grow(b, 8)
    assert b.block_table == [] and bm.num_free == 1  # nothing taken
    bm.release(a)
    bm.grow(b, 8)
    assert len(b.block_table) == 2


def test_a_what_if_pool_costs_only_what_it_touches() -> None:
    """10^12 tokens of capacity: no object per block, only the ones requests use."""
    bm = BlockManager(10**12 // BS, BS, b"ns")
    seq = SequenceState(list(range(40)))
    bm.admit(seq)
    bm.grow(seq, 40)
    seq.num_kv = 40
    bm.publish(seq)
    bm.release(seq)
    again = SequenceState(list(range(41)))
    bm.admit(again)
    assert again.num_cached == 40 and len(bm.blocks) == 10
    u = bm.usage()
    assert u["blocks_total"] == 10**12 // BS and u["blocks_cached"] == 0 and u["blocks_in_use"] == 10


def test_a_hash_collision_is_never_served(monkeypatch) -> None:
    """Blocks of other content under the same hash (every hash colliding): the block published second is
    not entered and is counted as a collision; a prompt of it is never served the first one's K/V (a lookup
    goes by content), and the same tokens after another prefix are a miss."""
    monkeypatch.setattr(block_manager, "chain_hash", lambda parent, block: b"one hash for all")
    bm = BlockManager(8, BS, b"ns")
    seq = published(bm, [1, 2, 3, 4, 5, 6, 7, 8, 9])
    assert bm.stats.collisions == 1 and len(bm.table) == 1  # its second block collides with its first
    assert len(bm.match([1, 2, 3, 4, 5, 6, 7, 8, 9])[0]) == 1
    assert bm.match([5, 6, 7, 8, 9])[0] == []  # the second block's tokens at the chain's start
    published(bm, [9, 9, 9, 9, 9])
    assert bm.stats.collisions == 2 and bm.match([9, 9, 9, 9, 9])[0] == []
    assert seq.block_hashes == [b"one hash for all"] * 2  # hashes are what the hash function says


def published(bm: BlockManager, tokens: list[int], salt: str = "") -> SequenceState:
    """A sequence admitted, its K/V written and its full blocks published, then released."""
    seq = SequenceState(tokens, salt=salt)
    bm.admit(seq)
    bm.grow(seq, len(tokens))
    seq.num_kv = len(tokens)
    bm.publish(seq)
    bm.release(seq)
    return seq


@pytest.mark.parametrize("scheme", [None, "vllm-sha256"])
def test_a_lookup_hashes_nothing(monkeypatch, scheme: str | None) -> None:
    """A warm request of 8 new tokens after 32 cached: its lookup finds the 8 cached blocks by content and
    hashes none of them (it hashed all 8, and the first block it missed); publishing hashes its 2 new blocks
    and nothing else. The hashes are the ones the chain gives, with the engine's hash and with vLLM's (a
    cache salt in the first block's)."""
    calls: list[int] = []
    bm = BlockManager(64, BS, b"ns")
    if scheme is None:
        real = block_manager.chain_hash
        monkeypatch.setattr(block_manager, "chain_hash", lambda p, b: calls.append(1) or real(p, b))
    else:
        vllm = VllmBlockHash(scheme, seed="test")
        real_block = vllm.block
        monkeypatch.setattr(vllm, "block", lambda *a: calls.append(1) or real_block(*a))
        bm.use_vllm_hash(vllm)
    prefix = list(range(100, 132))
    cold = published(bm, prefix + [7], salt="s")
    assert len(calls) == 8
    calls.clear()
    warm = SequenceState(prefix + list(range(8)) + [7], salt="s")
    matched = bm.match(warm.token_ids, warm.salt)
    assert matched == ([bm.table[h] for h in cold.block_hashes], cold.block_hashes) and calls == []
    assert bm.match(warm.token_ids, "another salt")[0] == []
    bm.admit(warm, True, matched)
    bm.grow(warm, len(warm))
    warm.num_kv = len(warm)
    bm.publish(warm)
    assert len(calls) == 2 and warm.block_hashes[:8] == cold.block_hashes
    parent = bm.root("s")
    for i, h in enumerate(warm.block_hashes):  # every hash the chain's own
        parent = bm.block_hash(parent, tuple(warm.token_ids[i * BS : (i + 1) * BS]), i, "s")
        assert h == parent
