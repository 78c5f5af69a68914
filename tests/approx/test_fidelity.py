"""Fidelity metrics: exact for identical paths, each one moving the right way when the paths differ, a
logit cosine blind to a constant shift, and hidden-state cosines that a few huge dimensions cannot decide."""

from __future__ import annotations

import torch

import engine
from engine.approx import assembly as kv_edit
from engine.approx.assembly import Compute, assemble
from engine.approx.fidelity import HiddenStates, compare, hidden_states
from tests.conftest import random_ids as tokens


def test_the_exact_path_scores_perfectly(eng) -> None:
    ids = tokens(30, 30)
    gen = kv_edit.generate(eng, ids, [Compute(30)], max_new_tokens=5)
    with hidden_states(eng.model) as hidden:
        assemble(eng, ids, [Compute(30)])
    f = compare(gen.logits[0], gen.logits[0], gen.token_ids, gen.token_ids, hidden, hidden)
    assert (f.kl, f.top1_agree, f.topk_agree, f.exact_top_rank, f.centred_cosine) == (0.0, True, 1.0, 0, 1.0)
    assert (f.first_difference, f.continuation_agree) == (5, True)
    assert f.layer_cosine == [1.0] * eng.config.num_layers


def test_metrics_see_a_different_answer() -> None:
    exact = torch.arange(20.0, 0.0, -1.0)  # token 0 most likely, then 1, 2, ...
    approx = exact.clone()
    approx[[0, 1]] = approx[[1, 0]]  # the top two swapped
    f = compare(exact, approx, [5, 6, 7], [5, 9, 7])
    assert f.kl > 0.1 and f.centred_cosine < 1.0 and f.topk_agree == 1.0  # the same ten most likely tokens
    assert (f.top1_agree, f.exact_top_rank, f.first_difference, f.continuation_agree) == (False, 1, 1, False)
    assert compare(exact, exact.flip(0)).topk_agree == 0.0  # no exact top-10 token in the other top 10


def test_the_logit_cosine_ignores_a_shift_and_does_not_saturate() -> None:
    base = torch.linspace(-2.0, 2.0, 100)
    same = compare(base, base + 40.0)  # softmax is blind to a constant: the same answer
    assert same.kl < 1e-12 and same.centred_cosine > 1 - 1e-12
    other = compare(base + 40.0, base.flip(0) + 40.0)  # the opposite ranking, on a large common offset
    raw = torch.nn.functional.cosine_similarity(base + 40.0, base.flip(0) + 40.0, dim=0)
    assert raw > 0.99 and other.centred_cosine < -0.99


def test_one_huge_dimension_does_not_decide_the_hidden_cosine() -> None:
    exact_last = torch.tensor([1000.0, 1.0, 2.0, -1.0], dtype=torch.float64)
    approx_last = torch.tensor([1000.0, -1.0, -2.0, 1.0], dtype=torch.float64)  # every small dim flipped
    stats = dict(mean=[torch.zeros(4, dtype=torch.float64)], std=[torch.tensor([900.0, 1.0, 2.0, 1.0])])
    exact = HiddenStates(last=[exact_last], **stats)
    approx = HiddenStates(last=[approx_last], mean=[], std=[])
    raw = torch.nn.functional.cosine_similarity(exact_last, approx_last, dim=0)
    (standardized,) = compare(torch.zeros(3), torch.zeros(3), (), (), exact, approx).layer_cosine
    assert raw > 0.99 and standardized < 0


def test_hidden_states_keep_the_last_token_and_moments_over_every_forward(tiny_dir) -> None:
    ids = tokens(40, 31)
    whole = engine.load(str(tiny_dir("qwen2")), device="cpu", cache_tokens=256)
    chunked = engine.load(str(tiny_dir("qwen2")), device="cpu", cache_tokens=256, prefill_chunk=16)
    with hidden_states(whole.model) as one:
        assemble(whole, ids, [Compute(40)])
    with hidden_states(chunked.model) as three:  # three forwards of 16, 16 and 8 rows
        assemble(chunked, ids, [Compute(40)])
    assert len(one.last) == whole.config.num_layers and one.last[0].shape == (whole.config.hidden_size,)
    for a, b in ((one.last, three.last), (one.mean, three.mean), (one.std, three.std)):
        assert all(torch.allclose(x, y, atol=1e-5) for x, y in zip(a, b, strict=True))
    assert all(bool((s > 0).all()) for s in one.std)
    assert one.forward_rows == [40]
    with hidden_states(whole.model) as other:
        assemble(whole, ids[:39] + [ids[0]], [Compute(40)])
    assert not torch.equal(one.last[-1], other.last[-1])


def test_hidden_states_count_the_rows_of_every_forward(tiny_dir) -> None:
    eng = engine.load(str(tiny_dir("qwen2")), device="cpu", cache_tokens=256)
    with hidden_states(eng.model) as h:
        eng.generate(tokens(20, 7), max_new_tokens=4, cache=False)
    assert h.forward_rows == [20, 1, 1, 1]  # the prefill, then one decode step per token after the first
