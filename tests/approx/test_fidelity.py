"""Fidelity metrics: exact for identical paths, and each one moving the right way when the paths differ."""

from __future__ import annotations

import torch

from engine.approx import assembly as kv_edit
from engine.approx.assembly import Compute, assemble
from engine.approx.fidelity import compare, last_hidden
from tests.conftest import random_ids as tokens


def test_the_exact_path_scores_perfectly(eng) -> None:
    ids = tokens(30, 30)
    gen = kv_edit.generate(eng, ids, [Compute(30)], max_new_tokens=5)
    with last_hidden(eng.model) as hidden:
        assemble(eng, ids, [Compute(30)])
    f = compare(gen.logits[0], gen.logits[0], gen.token_ids, gen.token_ids, hidden, hidden)
    assert (f.cosine, f.kl, f.top1_agree, f.exact_top_rank) == (1.0, 0.0, True, 0)
    assert (f.first_difference, f.continuation_agree) == (5, True)
    assert f.layer_cosine == [1.0] * eng.config.num_layers


def test_metrics_see_a_different_answer() -> None:
    exact = torch.tensor([3.0, 1.0, 0.0, -1.0])
    approx = torch.tensor([1.0, 3.0, 0.5, -1.0])
    f = compare(exact, approx, [5, 6, 7], [5, 9, 7])
    assert f.cosine < 0.9 and f.kl > 0.1
    assert (f.top1_agree, f.exact_top_rank, f.first_difference, f.continuation_agree) == (False, 1, 1, False)


def test_last_hidden_keeps_the_last_token_of_every_layer(eng) -> None:
    ids = tokens(12, 31)
    with last_hidden(eng.model) as hidden:
        assemble(eng, ids, [Compute(12)])
    assert len(hidden) == eng.config.num_layers and hidden[0].shape == (eng.config.hidden_size,)
    with last_hidden(eng.model) as other:
        assemble(eng, ids[:11] + [ids[0]], [Compute(12)])
    assert not torch.equal(hidden[-1], other[-1])
