"""Edit and splice plans: which rows are reused, relocated or recomputed, and what that does to the logits."""

from __future__ import annotations

import math

import torch

from engine.approx.assembly import Compute, Reuse, assemble
from engine.approx.plans import plan_edit, plan_splice, segments
from engine.approx.snapshot import snapshot
from tests.conftest import random_ids as tokens


def test_segments_group_consecutive_rows_and_compute_the_last_token(eng) -> None:
    s = snapshot(eng, tokens(10, 20))
    labels = [(s, 0), (s, 1), None, None, (s, 5), (s, 6), (s, 3), (s, 4)]
    assert segments(labels) == [Reuse(s, 0, 2), Compute(2), Reuse(s, 5, 7), Reuse(s, 3, 4), Compute(1)]


def test_edit_with_an_unchanged_prompt_is_plain_reuse(eng) -> None:
    ids = tokens(48, 21)
    s = snapshot(eng, ids)
    for window in (0, 8):
        plan = plan_edit(s, ids, recompute_after=window)
        assert plan == [Reuse(s, 0, 47), Compute(1)]
        a = assemble(eng, ids, plan)
        assert (a.cached_tokens, a.approximate_tokens) == (47, 0)
        assert torch.allclose(a.logits, assemble(eng, ids, [Compute(48)]).logits, atol=1e-5)


def test_edit_recomputes_the_span_and_relocates_what_follows(eng) -> None:
    old = tokens(60, 22)
    new = old[:20] + tokens(5, 23) + old[22:]  # two tokens replaced by five: later rows move by +3
    s = snapshot(eng, old)
    plan = plan_edit(s, new)
    assert plan == [Reuse(s, 0, 20), Compute(5), Reuse(s, 22, 59), Compute(1)]
    a = assemble(eng, new, plan)
    assert (a.cached_tokens, a.relocated_tokens, a.computed_tokens) == (20, 37, 6)
    wider = plan_edit(s, new, recompute_after=4)
    assert wider == [Reuse(s, 0, 20), Compute(9), Reuse(s, 26, 59), Compute(1)]
    exact = assemble(eng, new, [Compute(len(new))]).logits
    assert not torch.allclose(a.logits, exact, atol=1e-5)  # stale notes downstream: approximate


def test_splice_relocates_pieces_and_repairs_their_heads(eng) -> None:
    pre, skill_a, skill_b, tail = tokens(6, 24), tokens(20, 25), tokens(30, 26), tokens(7, 27)
    a, b = snapshot(eng, pre + skill_a), snapshot(eng, pre + skill_b)
    ids, plan = plan_splice([(b, 0, 36), (a, 6, 26), tail])
    assert ids == pre + skill_b + skill_a + tail
    assert plan == [Reuse(b, 0, 36), Reuse(a, 6, 26), Compute(7)]
    got = assemble(eng, ids, plan)
    assert (got.cached_tokens, got.relocated_tokens, got.computed_tokens) == (36, 20, 7)
    ids2, repaired = plan_splice([(b, 0, 36), (a, 6, 26), tail], recompute=0.15)
    head = math.ceil(0.15 * 20)
    assert ids2 == ids and repaired == [Reuse(b, 0, 36), Compute(head), Reuse(a, 6 + head, 26), Compute(7)]
    _, everything = plan_splice([(b, 0, 36), (a, 6, 26), tail], recompute=1.0)
    assert everything == [Reuse(b, 0, 36), Compute(27)]
