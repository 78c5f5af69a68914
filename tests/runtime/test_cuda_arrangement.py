"""The exactness suite in CUDA's arrangement (tests/cuda_layout.py: on a CPU, the torch backend arranged as on
CUDA and SDPA returning CUDA's fused-kernel strides; on a GPU, the real thing), on tiny random models of the
grouped-query shapes that fold query heads: SmolLM2's 9 heads over 3 KV heads and Qwen2.5-0.5B's 14 over 2.
Cold prefill and decode against transformers; warm against cold; a batch, chunked prefill beside decoding
and preemption against each request alone."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from engine.model import attention
from tests.conftest import build_hf_model
from tests.conftest import random_ids as tokens
from tests.cuda_layout import arrange_as_cuda
from tests.precision import Precision, assert_same_greedy_run
from tests.runtime.test_prefix_cache import assert_exact

BS = 16
SHAPES = {  # name: (architecture, overrides): head_dim 8 as in the other tiny models
    "smollm2 9/3": ("llama", dict(num_attention_heads=9, num_key_value_heads=3, hidden_size=72)),
    "qwen2 14/2": ("qwen2", dict(num_attention_heads=14, num_key_value_heads=2, hidden_size=112)),
}


@pytest.fixture(scope="module", params=SHAPES)
def model(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """(name, transformers model in float32, its folder)"""
    kind, overrides = SHAPES[request.param]
    hf = build_hf_model(kind, **overrides)
    folder = tmp_path_factory.mktemp(request.param.replace(" ", "-").replace("/", "-"))
    hf.save_pretrained(str(folder), safe_serialization=True)
    return request.param, hf, folder


@pytest.fixture
def cuda(monkeypatch: pytest.MonkeyPatch, device: torch.device) -> None:
    if device.type == "cpu":
        arrange_as_cuda(monkeypatch)


def engine_of(load, folder: Path, **options):
    return load(folder, block_size=BS, **{"cache_tokens": 1024} | options)


def test_the_arrangement_is_cudas(cuda, device: torch.device) -> None:
    """The backend folds query heads into rows under one masked call, and a kernel's output is a transposed
    view, which `.view` cannot fold back (what the backend once did)."""
    if device.type != "cpu":
        pytest.skip("the emulation runs on a CPU; here the real kernels run")
    backend = attention.select("auto", device, torch.float32, BS)
    assert (backend.split, backend.native_gqa) == (False, False)
    q = torch.randn(2, 3, 5, 8)
    out = F.scaled_dot_product_attention(q, q, q)
    assert out.shape == (2, 3, 5, 8) and not out.is_contiguous() and out.transpose(1, 2).is_contiguous()
    with pytest.raises(RuntimeError, match="view"):
        out.view(2, 15, 8)


def test_cold_prefill_and_decode_match_transformers(model, cuda, load, precision: Precision) -> None:
    name, hf, folder = model
    tol = precision.logits_tol(name, model=hf)
    e = engine_of(load, folder)
    ids = tokens(40, 1)
    gen = e.generate(ids, max_new_tokens=8, return_logits=True, cache=False)
    with torch.no_grad():
        ref = hf(torch.tensor([ids + gen.token_ids[:-1]])).logits[0]
    assert (e.logits(ids).cpu() - ref[: len(ids)]).abs().max().item() <= tol
    assert (gen.logits.float().cpu() - ref[len(ids) - 1 :]).abs().max().item() <= tol


def test_warm_prefill_and_decode_equal_cold(model, cuda, load, precision: Precision) -> None:
    """A hit of one block, of several ending mid-block, a whole prompt, and the turns of a conversation."""
    name, hf, folder = model
    tol = precision.cache_tol(name) if precision.exact else precision.error(name, hf).logits
    e = engine_of(load, folder)
    base = tokens(64, 2)
    e.generate(base[:20], max_new_tokens=1)
    assert_exact(e, base, expected_cached=16, tol=tol)
    assert_exact(e, base[:40] + tokens(9, 3), expected_cached=32, tol=tol)
    assert_exact(e, base, expected_cached=48, tol=tol)
    history = tokens(37, 4)
    for turn in range(3):
        gen = e.generate(history, max_new_tokens=10)
        history = history + gen.token_ids + tokens(5 + turn, 10 + turn)
        cached = len(e.blocks.match(history)[0]) * BS
        assert cached > 0
        assert_exact(e, history, expected_cached=cached, tol=tol)


def solo(load, folder: Path, prompts: list[list[int]], **options):
    return [engine_of(load, folder).generate(p, return_logits=True, **options) for p in prompts]


def assert_same(got, ref, tol: float) -> None:
    for g, r in zip(got, ref, strict=True):
        assert_same_greedy_run(g.token_ids, g.logits, r.token_ids, r.logits, tol)


def test_a_batch_equals_its_requests_alone(model, cuda, load, precision: Precision) -> None:
    """Shared prefixes (prefills after a prefix published in the same run), unequal lengths, decode rows of
    unequal contexts in one step, over scattered block tables."""
    name, hf, folder = model
    tol = precision.cache_tol(name) if precision.exact else precision.error(name, hf).logits
    shared = tokens(40, 5)
    prompts = [shared + tokens(9, 6), shared + tokens(30, 7), tokens(23, 8), shared[:17]]
    e = engine_of(load, folder)
    e.generate(shared + [3], max_new_tokens=1)  # published: the shared prompts' prefills start after it
    got = e.generate_many(prompts, max_new_tokens=10, return_logits=True)
    assert_same(got, solo(load, folder, prompts, max_new_tokens=10), tol)


def test_chunked_prefill_beside_decoding_and_preemption(model, cuda, load, precision: Precision) -> None:
    name, hf, folder = model
    tol = precision.cache_tol(name) if precision.exact else precision.error(name, hf).logits
    prompts = [tokens(40, 40 + i) for i in range(4)]
    small = engine_of(load, folder, cache_tokens=10 * BS, prefill_chunk=24)  # about two at a time
    got = small.generate_many(prompts, max_new_tokens=30, return_logits=True)
    assert sum(g.preemptions for g in got) > 0
    assert_same(got, solo(load, folder, prompts, max_new_tokens=30), tol)
    assert small.cache_stats()["blocks_in_use"] == 0
