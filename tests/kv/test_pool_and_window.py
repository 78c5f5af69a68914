"""Paged KV storage and the sequence window: the window mirrors the pool exactly, a prefill after a cached
prefix and every decode step read it instead of gathering the context from the pool, and without it (no device
memory) results are the same."""

from __future__ import annotations

import pytest
import torch

from engine.errors import CacheCapacityError
from engine.kv.pool import KVCache
from engine.kv.window import KVWindow
from tests.conftest import random_ids as tokens
from tests.precision import assert_same_greedy_run

BS = 16


def test_window_rows_equal_the_pool_and_extend_in_place(eng) -> None:
    kv, layers = eng.kv, eng.config.num_layers
    kv.k.normal_(generator=torch.Generator(kv.k.device).manual_seed(0))
    kv.v.normal_(generator=torch.Generator(kv.k.device).manual_seed(1))
    table = [5, 2, 9]  # scattered blocks: position p lives in block table[p // BS]
    window = KVWindow.from_blocks(kv, table, 40, capacity=48)
    slots = kv.slots(table, 0, 40)
    for layer in range(layers):
        k, v = kv.read(layer, slots)
        assert torch.equal(window.k[layer, :, :40], k.transpose(0, 1)) and torch.equal(
            window.v[layer, :, :40], v.transpose(0, 1)
        )
    new_k, new_v = (torch.randn(1, *kv.k.shape[-2:], dtype=kv.k.dtype, device=kv.k.device) for _ in "kv")
    k, v = window.extend(0, 40, new_k, new_v)
    assert k.shape[1] == 41 and torch.equal(k[:, 40], new_k[0]) and torch.equal(v[:, 40], new_v[0])
    assert k.data_ptr() == window.k[0].data_ptr()  # a view, not a copy


def test_rows_written_directly_are_the_context_a_step_reads(eng, cache_tol) -> None:
    """A window filled row by row with `write` (as relocated or spliced K/V would be) is the context:
    the same rows as the pool's give the same logits as the cached run."""
    prompt = tokens(40, 5)
    eng.generate(prompt[:33], max_new_tokens=1)  # publishes 2 blocks
    cold = eng.generate(prompt, max_new_tokens=1, return_logits=True, cache=False)
    hits, _ = eng.blocks.match(prompt)
    assert len(hits) * BS == 32
    slots, window = eng.kv.slots(hits, 0, 32), KVWindow.like(eng.kv, len(prompt))
    for layer in range(eng.config.num_layers):
        for row in range(32):  # one row at a time
            k, v = eng.kv.read(layer, slots[row : row + 1])
            window.write(layer, row, k, v)
    logits = eng.runner.compute(prompt[32:], window, start=32)
    assert (logits.cpu() - cold.logits[0]).abs().max().item() <= cache_tol


def test_prefill_and_decode_steps_do_not_gather_the_context(eng, monkeypatch) -> None:
    gathers: list[int] = []
    read = KVCache.read
    monkeypatch.setattr(
        KVCache, "read", lambda self, layer, slots: gathers.append(len(slots)) or read(self, layer, slots)
    )
    prompt = tokens(40, 0)
    eng.generate(prompt, max_new_tokens=1)
    for new in (2, 12):
        gathers.clear()
        gen = eng.generate(prompt + [7], max_new_tokens=new)
        assert gen.usage.cached_tokens == 32 and len(gen.token_ids) == new
        # the cached prefix is gathered into the window once per layer at admission; neither the prefill
        # after it nor the decode steps gather, however many there are
        assert gathers == [32] * eng.config.num_layers


@pytest.mark.parametrize("cached", [False, True])
def test_without_room_for_the_window_steps_gather_and_agree(
    eng, cache_tol, monkeypatch, cached: bool
) -> None:
    """Decode steps, and with a cached prefix the prefill after it too, gather from the pool instead."""
    prompt = tokens(37, 2)
    if cached:
        eng.generate(prompt, max_new_tokens=1)  # publishes 2 blocks
    cold = eng.generate(prompt, max_new_tokens=10, return_logits=True, cache=False)

    def no_memory(*args: object) -> None:
        raise torch.OutOfMemoryError("no room")

    monkeypatch.setattr(KVWindow, "from_blocks", no_memory)
    gathered = eng.generate(prompt, max_new_tokens=10, return_logits=True, cache_salt="" if cached else "new")
    assert gathered.usage.cached_tokens == (32 if cached else 0)
    assert_same_greedy_run(gathered.token_ids, gathered.logits, cold.token_ids, cold.logits, cache_tol)


def test_an_uncached_request_without_room_for_its_window_is_refused(eng, monkeypatch) -> None:
    """cache=False keeps K/V in the request's own window only: without memory for it, a clear error."""

    def no_memory(*args: object) -> None:
        raise torch.OutOfMemoryError("no room")

    monkeypatch.setattr(KVWindow, "like", no_memory)
    with pytest.raises(CacheCapacityError, match="no device memory for a 47-token K/V window"):
        eng.generate(tokens(37, 3), max_new_tokens=10, cache=False)
    assert eng.cache_stats()["blocks_in_use"] == 0 and not eng.has_unfinished()
