"""Paged KV storage and the decoding window: the window mirrors the pool exactly, a decode step reads it
instead of gathering the context from the pool, and without it (no device memory) results are the same."""

from __future__ import annotations

import torch

from engine.kv_cache import KVCache, SequenceKV
from tests.conftest import random_ids as tokens
from tests.precision import assert_same_greedy_run

BS = 16


def test_window_rows_equal_the_pool_and_extend_in_place(eng) -> None:
    kv, layers = eng.kv, eng.config.num_layers
    kv.k.normal_(generator=torch.Generator(kv.k.device).manual_seed(0))
    kv.v.normal_(generator=torch.Generator(kv.k.device).manual_seed(1))
    table = [5, 2, 9]  # scattered blocks: position p lives in block table[p // BS]
    window = SequenceKV(kv, table, 40, capacity=48)
    slots = kv.slots(table, 0, 40)
    for layer in range(layers):
        k, v = kv.read(layer, slots)
        assert torch.equal(window.k[layer, :, :40], k.transpose(0, 1)) and torch.equal(
            window.v[layer, :, :40], v.transpose(0, 1)
        )
    new_k, new_v = (torch.randn(1, *kv.k.shape[-2:], dtype=kv.k.dtype, device=kv.k.device) for _ in "kv")
    k, v = window.extend(0, 40, new_k, new_v)
    assert k.shape[0] == 41 and torch.equal(k[40], new_k[0]) and torch.equal(v[40], new_v[0])
    assert k.data_ptr() == window.k[0].data_ptr()  # a view, not a copy


def test_decode_steps_do_not_gather_the_context(eng, monkeypatch) -> None:
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
        # the prefill after the cached prefix gathers once per layer, the window once per layer when decoding
        # starts; the decode steps never do, however many there are
        assert gathers == [41] * (2 * eng.config.num_layers)


def test_without_room_for_the_window_steps_gather_and_agree(eng, cache_tol, monkeypatch) -> None:
    prompt = tokens(37, 2)
    with_window = eng.generate(prompt, max_new_tokens=10, return_logits=True, cache=False)

    def no_memory(*args: object) -> None:
        raise torch.OutOfMemoryError("no room")

    monkeypatch.setattr(SequenceKV, "__init__", no_memory)
    gathered = eng.generate(prompt, max_new_tokens=10, return_logits=True, cache=False)
    assert_same_greedy_run(
        gathered.token_ids, gathered.logits, with_window.token_ids, with_window.logits, cache_tol
    )
