"""Prefix reuse is exact: logits and greedy tokens with the cache equal those without it (float32: within
1e-5; half precision: within transformers' own rounding error, see tests/precision.py)."""

from __future__ import annotations

import pytest
import torch

import engine
from engine.errors import CacheCapacityError
from engine.kv import block_manager
from tests.conftest import random_ids as tokens
from tests.precision import assert_same_greedy_run

BS = 16


def assert_exact(e, prompt: list[int], expected_cached: int, tol: float, new: int = 8):
    """Run with the cache, then cold; same greedy tokens and logits within `tol`."""
    warm = e.generate(prompt, max_new_tokens=new, return_logits=True)
    cold = e.generate(prompt, max_new_tokens=new, return_logits=True, cache=False)
    assert warm.usage.cached_tokens == expected_cached
    assert warm.usage.computed_tokens == len(prompt) - expected_cached
    assert warm.usage.first_divergence == expected_cached
    assert cold.usage.cached_tokens == 0
    assert_same_greedy_run(warm.token_ids, warm.logits, cold.token_ids, cold.logits, tol)
    return warm


def test_hit_ending_at_a_block_boundary(eng, cache_tol) -> None:
    base = tokens(48, 0)
    eng.generate(base, max_new_tokens=1)
    assert_exact(eng, base[:32] + tokens(20, 1), expected_cached=32, tol=cache_tol)


def test_hit_of_one_block(eng, cache_tol) -> None:
    base = tokens(48, 5)
    eng.generate(base[:20], max_new_tokens=1)
    assert_exact(eng, base, expected_cached=16, tol=cache_tol)


def test_hit_ending_mid_block_reuses_whole_blocks_only(eng, cache_tol) -> None:
    base = tokens(64, 0)
    eng.generate(base, max_new_tokens=1)
    assert_exact(eng, base[:40] + tokens(9, 2), expected_cached=32, tol=cache_tol)


@pytest.mark.parametrize(("length", "expected"), [(48, 32), (50, 48), (15, 0)])
def test_full_prompt_hit_recomputes_at_least_the_last_token(
    eng, cache_tol, length: int, expected: int
) -> None:
    prompt = tokens(length, 3)
    eng.generate(prompt, max_new_tokens=1)
    assert_exact(eng, prompt, expected_cached=expected, tol=cache_tol)


def test_multi_turn_reuses_the_generated_answer(eng, cache_tol) -> None:
    history = tokens(37, 4)
    for turn in range(4):
        gen = eng.generate(history, max_new_tokens=12)
        # K/V exist for the prompt and every answer token but the last sampled one
        written = len(history) + len(gen.token_ids) - 1
        history = history + gen.token_ids + tokens(5 + turn, 10 + turn)
        expected = min(written // BS, (len(history) - 1) // BS) * BS
        warm = assert_exact(eng, history, expected_cached=expected, new=12, tol=cache_tol)
        assert warm.usage.cached_tokens > len(history) - len(gen.token_ids) - 5 - turn - BS


def test_a_short_cached_prefix_gives_the_cold_logits_bit_for_bit(eng) -> None:
    """One cached block before 184 new tokens: on a CPU one causal call over all 200 keys, the query rows
    front-padded to the cold prefill's, so the prefill's logits equal cold's bit for bit. The block's
    K/V come from a prompt of over 64 tokens, whose layers multiply as the cold prefill's do (see `linear`)."""
    if eng.device.type != "cpu":
        pytest.skip("the CPU's arrangement: elsewhere one masked call, equal within tolerance")
    prompt = tokens(200, 90)
    eng.generate(prompt[:BS] + tokens(100, 91), max_new_tokens=1)
    warm = eng.generate(prompt, max_new_tokens=6, return_logits=True)
    cold = eng.generate(prompt, max_new_tokens=6, return_logits=True, cache=False)
    assert warm.usage.cached_tokens == BS
    assert warm.token_ids == cold.token_ids and torch.equal(warm.logits[0], cold.logits[0])
    # decode steps read the warm request's two runs of blocks (the cached one, its own) merged: within 1e-5
    assert (warm.logits - cold.logits).abs().max().item() <= 1e-5


def test_chunked_prefill_is_exact(tiny_dir, load, cache_tol) -> None:
    chunked = load(tiny_dir("qwen2"), cache_tokens=512, prefill_chunk=7)
    ids = tokens(50, 5)
    got = chunked.generate(ids, max_new_tokens=6, return_logits=True, cache=False)
    assert (got.logits[0] - chunked.logits(ids)[-1]).abs().max().item() <= cache_tol


def test_eviction_under_small_capacity_stays_exact(tiny_dir, load, cache_tol) -> None:
    small = load(tiny_dir("qwen2"), block_size=BS, cache_tokens=8 * BS)
    prompts = [tokens(60, 20 + i) for i in range(4)]
    for p in prompts + prompts[::-1]:
        predicted = len(small.blocks.match(p)[0]) * BS
        assert_exact(small, p, expected_cached=predicted, new=4, tol=cache_tol)
    stats = small.cache_stats()
    assert stats["evictions"] > 0 and stats["hit_tokens"] > 0
    assert stats["blocks_in_use"] == 0 and stats["blocks_total"] == 8


def test_memory_is_bounded(tiny_dir, load) -> None:
    small = load(tiny_dir("qwen2"), block_size=BS, cache_tokens=8 * BS)
    before = (small.kv.k.shape, small.kv.k.data_ptr())
    for i in range(6):
        small.generate(tokens(100, 30 + i), max_new_tokens=20)
    assert (small.kv.k.shape, small.kv.k.data_ptr()) == before and small.kv.k.shape[1] == 8


def test_impossible_request_is_refused_and_leaves_no_trace(tiny_dir, load) -> None:
    small = load(tiny_dir("qwen2"), block_size=BS, cache_tokens=4 * BS)
    with pytest.raises(
        CacheCapacityError,
        match=r"request needs 5 KV blocks \(70 tokens at 16 per block\) but the cache holds 4",
    ):
        small.generate(tokens(60, 40), max_new_tokens=10)
    assert small.cache_stats()["blocks_in_use"] == 0
    assert len(small.generate(tokens(40, 41), max_new_tokens=10).token_ids) == 10


def test_referenced_blocks_are_never_evicted() -> None:
    from engine.kv.sequence import SequenceState

    bm = block_manager.BlockManager(num_blocks=6, block_size=4, namespace=b"test")
    held = SequenceState(list(range(12)))
    bm.admit(held)
    bm.grow(held, 12)
    held.num_kv = 12
    bm.publish(held)  # 3 hashed blocks, still referenced
    other = SequenceState(list(range(100, 112)))
    bm.admit(other)
    bm.grow(other, 12)
    assert set(held.block_table).isdisjoint(other.block_table)
    third = SequenceState(list(range(200, 204)))
    bm.admit(third)
    with pytest.raises(CacheCapacityError):
        bm.grow(third, 4)
    assert all(bm.blocks[b].ref_count == 1 and bm.blocks[b].hash is not None for b in held.block_table)


def test_injected_hash_collision_is_caught(eng, cache_tol, monkeypatch) -> None:
    monkeypatch.setattr(block_manager, "chain_hash", lambda parent, toks: b"same-hash-for-all")
    first = tokens(40, 50)
    eng.generate(first, max_new_tokens=1)
    other = tokens(40, 51)
    warm = assert_exact(eng, other, expected_cached=0, tol=cache_tol)
    assert warm.usage.cached_tokens == 0 and eng.cache_stats()["collisions"] > 0


def test_salt_isolates_tenants(eng) -> None:
    prompt = tokens(40, 60)
    eng.generate(prompt, max_new_tokens=1, cache_salt="tenant-a")
    assert eng.generate(prompt, max_new_tokens=1, cache_salt="tenant-b").usage.cached_tokens == 0
    assert eng.generate(prompt, max_new_tokens=1, cache_salt="tenant-a").usage.cached_tokens == 32


def test_namespace_separates_models_and_dtypes(tiny_dir) -> None:
    a = engine.load(str(tiny_dir("qwen2")), device="cpu", cache_tokens=256)
    b = engine.load(str(tiny_dir("llama")), device="cpu", cache_tokens=256)
    c = engine.load(str(tiny_dir("qwen2")), device="cpu", dtype="bfloat16", cache_tokens=256)
    assert len({a.blocks.root(""), b.blocks.root(""), c.blocks.root("")}) == 3


def test_cache_off_and_reset(eng, tiny_dir, load) -> None:
    prompt = tokens(40, 70)
    eng.generate(prompt, max_new_tokens=1, cache=False)
    assert eng.generate(prompt, max_new_tokens=1).usage.cached_tokens == 0  # cold runs publish nothing
    assert eng.generate(prompt, max_new_tokens=1).usage.cached_tokens == 32
    eng.reset_cache()
    assert eng.generate(prompt, max_new_tokens=1).usage.cached_tokens == 0
    off = load(tiny_dir("qwen2"), cache_tokens=256, cache=False)
    off.generate(prompt, max_new_tokens=1)
    assert off.generate(prompt, max_new_tokens=1).usage.cached_tokens == 0


def test_divergence_context_shows_the_break(smollm2_on_device) -> None:
    system = {"role": "system", "content": "You are a careful assistant. " * 8}
    smollm2_on_device.generate(
        [system, {"role": "user", "content": "Current time: 10:01. Say hi."}], max_new_tokens=1
    )
    gen = smollm2_on_device.generate(
        [system, {"role": "user", "content": "Current time: 10:02. Say hi."}], max_new_tokens=1
    )
    assert gen.usage.cached_tokens > 0 and "⟂" in gen.usage.divergence_context
    before, after = gen.usage.divergence_context.split("⟂")
    assert "careful assistant" in before or "user" in before
    assert "10:02" in before + after
