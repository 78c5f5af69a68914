"""Our from-scratch decoder against transformers (eager attention, float32) on the same weights."""

from __future__ import annotations

import pytest
import torch

import engine
from tests.conftest import build_hf_model

KINDS = ["qwen2", "qwen3", "llama", "llama-tied"]


@pytest.fixture(scope="module", params=KINDS)
def pair(request, tiny_dir):
    kind = request.param
    return build_hf_model(kind), engine.load(str(tiny_dir(kind)), device="cpu", cache_tokens=2048)


def test_logits_match_transformers(pair) -> None:
    ref_model, ours = pair
    ids = torch.randint(0, 512, (57,), generator=torch.Generator().manual_seed(1)).tolist()
    with torch.no_grad():
        ref = ref_model(torch.tensor([ids])).logits[0]
    got = ours.logits(ids)
    assert got.shape == ref.shape and got.dtype == torch.float32
    assert (got - ref).abs().max().item() <= 1e-4


def test_greedy_continuation_matches_transformers(pair) -> None:
    ref_model, ours = pair
    ids = torch.randint(0, 512, (20,), generator=torch.Generator().manual_seed(2)).tolist()
    with torch.no_grad():
        ref = ref_model.generate(torch.tensor([ids]), max_new_tokens=32, do_sample=False, eos_token_id=None)
    gen = ours.generate(ids, max_new_tokens=32)
    assert gen.token_ids == ref[0, len(ids) :].tolist()
    assert len(set(gen.token_ids)) > 1, "a degenerate continuation would prove little"


def test_qwen3_head_dim_is_explicit(tiny_dir) -> None:
    e = engine.load(str(tiny_dir("qwen3")), device="cpu", cache_tokens=256)
    assert e.config.head_dim == 32 and e.config.hidden_size // e.config.num_heads == 16
    assert e.config.qk_norm and not e.config.qkv_bias


def test_tied_head_shares_embedding(tiny_dir) -> None:
    tied = engine.load(str(tiny_dir("llama-tied")), device="cpu", cache_tokens=256)
    untied = engine.load(str(tiny_dir("llama")), device="cpu", cache_tokens=256)
    assert tied.model.lm_head is tied.model.embed
    assert untied.model.lm_head is not untied.model.embed
