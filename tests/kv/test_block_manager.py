"""BlockManager invariants under long random sequences of admit / grow / publish / release / match."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import CacheCapacityError
from engine.kv.block_manager import BlockManager, chain_hash, token_bytes
from engine.kv.sequence import SequenceState

NUM_BLOCKS, BS = 12, 4


def check_invariants(bm: BlockManager) -> None:
    referenced = {b.id for b in bm.blocks if b.ref_count > 0}
    assert all(b.ref_count >= 0 for b in bm.blocks)
    assert referenced.isdisjoint(bm.free)  # no block both free and referenced
    assert len(referenced) + len(bm.free) == bm.num_blocks  # free + used = capacity
    assert 0 <= bm.reserved <= len(bm.free)  # every promised block can still be handed out
    for h, block_id in bm.table.items():
        block = bm.blocks[block_id]
        assert block.hash == h and len(block.token_ids) == BS
    for block in bm.blocks:  # a hashed block is always findable by its hash
        assert block.hash is None or bm.table[block.hash] == block.id


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
            try:
                bm.admit(seq, len(toks) + extra)
            except CacheCapacityError:
                check_invariants(bm)
                continue
            assert seq.num_cached % BS == 0 and seq.num_cached < len(toks)
            for i, block_id in enumerate(seq.block_table):  # a hit holds exactly the prompt's tokens
                assert bm.blocks[block_id].token_ids == tuple(toks[i * BS : (i + 1) * BS])
            bm.grow(seq, len(toks))
            seq.num_kv = len(toks)
            bm.publish(seq)
            live.append((seq, len(toks) + extra))
        elif step[0] == "decode" and live:
            seq, limit = live[step[1] % len(live)]
            for _ in range(min(step[2], limit - len(seq))):
                seq.token_ids.append(len(seq) % 3)
                bm.grow(seq, seq.num_kv + 1)  # admitted capacity guarantees this succeeds
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
    assert len(bm.free) == NUM_BLOCKS


def test_lru_evicts_least_recently_used_first() -> None:
    bm = BlockManager(4, BS, b"ns")
    a, b = SequenceState([1] * 9), SequenceState([2] * 9)
    for seq in (a, b):
        bm.admit(seq, 8)
        bm.grow(seq, 8)
        seq.num_kv = 8
        bm.publish(seq)
        bm.release(seq)
    touch = SequenceState([1] * 9)
    bm.admit(touch, 9)  # touch a: b is now least recently used
    bm.release(touch)
    c = SequenceState([3] * 9)
    bm.admit(c, 8)
    bm.grow(c, 8)
    assert bm.match([2] * 9)[0] == []  # b's blocks were the ones evicted
    assert bm.usage()["evictions"] == 2


def test_usage_counts() -> None:
    bm = BlockManager(8, BS, b"ns")
    seq = SequenceState(list(range(10)))
    bm.admit(seq, 10)
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


def test_admission_reserves_the_blocks_a_live_sequence_may_still_need() -> None:
    bm = BlockManager(4, BS, b"ns")
    a = SequenceState([1])
    bm.admit(a, 16)  # 4 blocks promised, 1 taken so far
    bm.grow(a, 1)
    with pytest.raises(CacheCapacityError, match="only 0 of 4 can be freed"):
        bm.admit(SequenceState([2]), 4)  # three free blocks, all promised to a
    bm.grow(a, 16)  # a grows to its admitted size
    with pytest.raises(CacheCapacityError, match="past the size it was admitted for"):
        bm.grow(a, 17)
    bm.release(a)
    assert bm.reserved == 0 and len(bm.free) == 4
