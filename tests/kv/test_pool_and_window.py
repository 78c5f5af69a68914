"""Paged KV storage and the private window of the approximate experiments: the window mirrors the pool
exactly and rows written into it are the context a windowed forward reads; the exact paths read the pool in
place (no window), and an allocation the pool cannot make is a capacity error."""

from __future__ import annotations

import pytest
import torch

from engine.errors import CacheCapacityError
from engine.kv.pool import KVCache
from engine.kv.window import KVWindow
from engine.model.attention.torch_sdpa import TorchPlan
from tests.conftest import random_ids as tokens

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


def test_a_warm_request_reads_its_cached_prefix_in_the_pool(eng, monkeypatch) -> None:
    """No window, no copy of the cached prefix: the prefill after it and every decode step read the pool
    through the block table, and the most a step holds besides is one layer's gather of its context."""
    buffers: list[int] = []
    gather = TorchPlan._gather

    def recorded(self: TorchPlan, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        out = gather(self, layer)
        buffers.append(sum(b.numel() * b.element_size() for b in self.buffers or ()))
        return out

    monkeypatch.setattr(TorchPlan, "_gather", recorded)
    monkeypatch.setattr(KVWindow, "from_blocks", None)  # never called on the exact path
    prompt = tokens(200, 0)
    eng.generate(prompt, max_new_tokens=1)
    buffers.clear()
    gen = eng.generate(prompt + [7], max_new_tokens=4)
    assert gen.usage.cached_tokens == 192 and len(gen.token_ids) == 4
    prefix_kv = 192 * KVCache.bytes_per_token(eng.config, torch.float32)
    assert buffers and max(buffers) <= 1.1 * prefix_kv / eng.config.num_layers


def test_an_uncached_request_the_pool_cannot_hold_is_refused(eng) -> None:
    """cache=False runs in the pool too: a request longer than the whole pool is refused up front, by name."""
    with pytest.raises(CacheCapacityError, match="request needs 66 KV blocks"):
        eng.generate(tokens(1040, 3), max_new_tokens=10, cache=False)
    assert eng.cache_stats()["blocks_in_use"] == 0 and not eng.has_unfinished()


def test_an_allocation_that_fails_is_a_capacity_error(eng) -> None:
    per_block = eng.config.num_layers * BS * eng.config.num_kv_heads * eng.config.head_dim * 4
    with pytest.raises(
        CacheCapacityError, match="could not be allocated on cpu"
    ):  # 2^57 bytes: no machine has it
        KVCache(eng.config, 2**57 // per_block + 1, BS, torch.float32, torch.device("cpu"))
