"""Approximate K/V reuse: the relocation identities, exact splices and edits, plan refusals, and the rule
that nothing approximate is ever served by the exact prefix cache."""

from __future__ import annotations

import pytest
import torch

import engine
from engine.approx import assembly as kv_edit
from engine.approx.assembly import Compute, Reuse, assemble
from engine.approx.snapshot import cached_snapshot, snapshot
from engine.errors import KVPlanError
from tests.conftest import random_ids as tokens


def cold_logits(eng, ids: list[int]) -> torch.Tensor:
    return eng.generate(ids, max_new_tokens=1, cache=False, return_logits=True).logits[0]


def test_shift_composes_and_is_the_identity_at_zero(eng) -> None:
    k = snapshot(eng, tokens(30, 1)).k
    rope = eng.model.rope
    assert rope.shift(k, 0) is k  # delta 0: the very same rows, bit for bit
    assert torch.allclose(rope.shift(rope.shift(k, 37), -37), k, atol=1e-6)
    assert torch.allclose(rope.shift(rope.shift(k, 5), 9), rope.shift(k, 14), atol=1e-6)


def test_reuse_at_delta_zero_is_plain_exact_reuse(eng) -> None:
    ids = tokens(50, 2)
    s = snapshot(eng, ids[:32])
    a = assemble(eng, ids, [Reuse(s, 0, 32), Compute(18)])
    assert (a.cached_tokens, a.approximate_tokens, a.computed_tokens) == (32, 0, 18)
    cold = assemble(eng, ids, [Compute(50)])
    assert torch.allclose(a.logits, cold.logits, atol=1e-5)
    assert torch.allclose(a.logits, cold_logits(eng, ids), atol=1e-5)  # the engine's own cold path too


@pytest.mark.parametrize("kind", ["qwen2", "qwen3", "llama"])
def test_relocated_layer0_keys_equal_recomputed_ones(tiny_dir, kind: str) -> None:
    eng = engine.load(str(tiny_dir(kind)), device="cpu", cache_tokens=256)
    piece, short, long = tokens(24, 3), tokens(5, 4), tokens(12, 5)
    at5, at12 = snapshot(eng, short + piece), snapshot(eng, long + piece)
    moved = eng.model.rope.shift(at5.k[0, :, 5:], 7)  # layer 0 depends on the token and its position only
    assert (moved - at12.k[0, :, 12:]).abs().max() <= 1e-5
    assert (eng.model.rope.shift(at12.k[0, :, 12:], -7) - at5.k[0, :, 5:]).abs().max() <= 1e-5
    assert (at5.v[0, :, 5:] - at12.v[0, :, 12:]).abs().max() <= 1e-5  # values carry no position
    deeper = eng.model.rope.shift(at5.k[1, :, 5:], 7) - at12.k[1, :, 12:]
    assert deeper.abs().max() > 1e-4  # layer 1 has attended to a different context: not exact


def test_splice_of_pieces_computed_in_place_is_exact(eng) -> None:
    ids = tokens(60, 6)
    first, second = snapshot(eng, ids[:30]), snapshot(eng, ids[:50])
    a = assemble(eng, ids, [Reuse(first, 0, 30), Reuse(second, 30, 50), Compute(10)])
    assert (a.cached_tokens, a.relocated_tokens, a.stale_tokens, a.computed_tokens) == (50, 0, 0, 10)
    assert torch.allclose(a.logits, cold_logits(eng, ids), atol=1e-5)


def test_rows_are_labelled_relocated_or_stale(eng) -> None:
    ids = tokens(40, 7)
    s = snapshot(eng, ids)
    other = tokens(3, 8) + ids[3:]  # same length, changed context: rows after it are stale, not relocated
    a = assemble(eng, other, [Compute(3), Reuse(s, 3, 39), Compute(1)])
    assert (a.cached_tokens, a.relocated_tokens, a.stale_tokens, a.computed_tokens) == (0, 0, 36, 4)
    longer = tokens(5, 9) + ids[3:]
    b = assemble(eng, longer, [Compute(5), Reuse(s, 3, 39), Compute(1)])
    assert (b.cached_tokens, b.relocated_tokens, b.stale_tokens, b.computed_tokens) == (0, 36, 0, 6)


def test_plans_that_do_not_fit_are_refused(eng) -> None:
    ids = tokens(20, 10)
    s = snapshot(eng, ids)
    with pytest.raises(KVPlanError, match="covers"):
        assemble(eng, ids, [Compute(19)])
    with pytest.raises(KVPlanError, match="last token"):
        assemble(eng, ids, [Compute(1), Reuse(s, 1, 20)])
    with pytest.raises(KVPlanError, match="other tokens"):
        assemble(eng, ids, [Reuse(s, 1, 11), Compute(10)])
    with pytest.raises(KVPlanError, match="outside"):
        assemble(eng, ids + [3] * 6, [Compute(15), Reuse(s, 15, 25), Compute(1)])


def test_exact_generation_matches_the_engine(eng) -> None:
    ids = tokens(40, 11)
    ours = kv_edit.generate(eng, ids, [Compute(40)], max_new_tokens=6)
    ref = eng.generate(ids, max_new_tokens=6, cache=False, return_logits=True)
    assert ours.token_ids == ref.token_ids
    assert torch.allclose(ours.logits, ref.logits, atol=1e-5)
    assert (ours.usage.cached_tokens, ours.usage.approximate_tokens, ours.usage.computed_tokens) == (0, 0, 40)


def test_cached_snapshot_reads_the_exact_blocks(eng) -> None:
    ids = tokens(40, 12)
    assert cached_snapshot(eng, ids) is None
    eng.generate(ids, max_new_tokens=1)
    cached, fresh = cached_snapshot(eng, ids), snapshot(eng, ids)
    assert cached is not None and cached.token_ids == tuple(ids[:32])  # whole blocks of 16 only
    assert torch.allclose(cached.k, fresh.k[:, :, :32], atol=1e-5)


def test_approximate_kv_is_never_served_as_an_exact_hit(eng) -> None:
    old = tokens(64, 13)
    new = old[:20] + tokens(4, 14) + old[20:]  # an edit at token 20: blocks from 16 on differ
    eng.generate(old, max_new_tokens=1)
    before = eng.cache_stats()
    from engine.approx.plans import plan_edit

    approx = kv_edit.generate(eng, new, plan_edit(cached_snapshot(eng, old), new), max_new_tokens=3)
    assert approx.usage.approximate_tokens > 0
    assert eng.cache_stats() == before  # the approximate request touched no block
    exact = eng.generate(new, max_new_tokens=1, return_logits=True)
    assert exact.usage.cached_tokens == 16  # only the exact block before the edit
    assert torch.allclose(exact.logits[0], cold_logits(eng, new), atol=1e-5)


def test_a_plan_computes_all_its_runs_in_one_forward(eng, monkeypatch) -> None:
    """Three computed runs between reused ones take one forward of the model, and give what computing the
    runs one after the other gives (each token attends by position to every row before it)."""
    ids = tokens(60, 30)
    s = snapshot(eng, tokens(4, 31) + ids[4:])  # rows after the first 4 are stale for this prompt
    plan = [Compute(4), Reuse(s, 4, 20), Compute(6), Reuse(s, 26, 50), Compute(10)]
    forwards = []
    forward = type(eng.model).forward
    monkeypatch.setattr(type(eng.model), "forward", lambda *a, **k: forwards.append(1) or forward(*a, **k))
    one = assemble(eng, ids, plan)
    assert len(forwards) == 1
    monkeypatch.undo()
    window = one.window.like(eng.kv, len(ids))
    for seg_start, seg_end, reuse in ((4, 20, 4), (26, 50, 26)):  # the same reused rows...
        window.k[:, :, seg_start:seg_end] = s.k[:, :, reuse : reuse + seg_end - seg_start]
        window.v[:, :, seg_start:seg_end] = s.v[:, :, reuse : reuse + seg_end - seg_start]
    for start, end in ((0, 4), (20, 26), (50, 60)):  # ...and the runs computed in order, one forward each
        logits = eng.runner.compute(ids[start:end], window, start=start)
    assert (one.logits - logits).abs().max().item() <= 1e-5
    assert (one.window.k[:, :, :60] - window.k[:, :, :60]).abs().max().item() <= 1e-5


def test_an_uncached_request_takes_empty_blocks_and_evicts_nothing(tiny_dir, load) -> None:
    """cache=False on a shared engine runs in the pool under a salt of its own: it takes empty blocks (all it
    needs here), reads nothing cached and publishes nothing, so the cached blocks stay, all of them."""
    small = load(tiny_dir("qwen2"), block_size=16, cache_tokens=8 * 16)
    base = tokens(63, 32)
    small.generate(base, max_new_tokens=1)  # 3 full blocks cached, 5 blocks free
    before = small.cache_stats()
    gen = small.generate(base[:60], max_new_tokens=20, cache=False)  # 80 positions: all 5 free blocks
    after = small.cache_stats()
    assert gen.usage.cached_tokens == 0 and after["lookups"] == before["lookups"]
    assert (
        after["evictions"] == before["evictions"] and after["blocks_cached"] == before["blocks_cached"] == 3
    )
    assert small.generate(base, max_new_tokens=1).usage.cached_tokens == 48
