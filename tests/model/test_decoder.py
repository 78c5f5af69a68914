"""Our from-scratch decoder, on the run's device and dtype, against transformers (eager attention, float32) on
the same weights; tolerances from tests/precision.py."""

from __future__ import annotations

import functools

import pytest
import torch

from tests.conftest import build_hf_model
from tests.precision import near_ties

KINDS = ["qwen2", "qwen3", "llama", "llama-tied"]


@pytest.fixture(scope="module", params=KINDS)
def pair(request, tiny_dir, load, precision):
    """(transformers in float32 on CPU, ours on the device in the dtype, the logits tolerance, a report)"""
    kind = request.param
    observe = functools.partial(precision.observe, kind, "logits")
    return build_hf_model(kind), load(tiny_dir(kind), cache_tokens=2048), precision.logits_tol(kind), observe


def test_logits_match_transformers(pair) -> None:
    ref_model, ours, tol, observe = pair
    ids = torch.randint(0, 512, (57,), generator=torch.Generator().manual_seed(1)).tolist()
    with torch.no_grad():
        ref = ref_model(torch.tensor([ids])).logits[0]
    got = ours.logits(ids).cpu()
    assert got.shape == ref.shape and got.dtype == torch.float32
    assert observe((got - ref).abs().max().item()) <= tol


def test_greedy_continuation_matches_transformers(pair) -> None:
    """Every token ours picks is transformers' greedy choice after the same tokens, or a near-tie within the
    logits tolerance (in float32: 1e-4, which no step here comes near)."""
    ref_model, ours, tol, _ = pair
    ids = torch.randint(0, 512, (20,), generator=torch.Generator().manual_seed(2)).tolist()
    gen = ours.generate(ids, max_new_tokens=32)
    with torch.no_grad():
        ref = ref_model(torch.tensor([ids + gen.token_ids[:-1]])).logits[0, len(ids) - 1 :]
    assert near_ties(gen.token_ids, ref, tol) <= 2, "more than a couple of near-ties would prove little"
    assert len(set(gen.token_ids)) > 1, "a degenerate continuation would prove little"


def test_qwen3_head_dim_is_explicit(tiny_dir, load) -> None:
    e = load(tiny_dir("qwen3"), cache_tokens=256)
    assert e.config.head_dim == 32 and e.config.hidden_size // e.config.num_heads == 16
    assert e.config.qk_norm and not e.config.qkv_bias


def test_tied_head_shares_embedding(tiny_dir, load) -> None:
    tied = load(tiny_dir("llama-tied"), cache_tokens=256)
    untied = load(tiny_dir("llama"), cache_tokens=256)
    assert tied.model.lm_head is tied.model.embed
    assert untied.model.lm_head is not untied.model.embed
