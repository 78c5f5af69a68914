"""A snapshot knows whether it is exact and which weights computed it: only exact snapshots count as cached
tokens, and a snapshot of other weights or another dtype is refused by name."""

from __future__ import annotations

import dataclasses

import pytest

import engine
from engine.approx.assembly import Compute, Reuse, assemble
from engine.approx.snapshot import Snapshot, cached_snapshot, snapshot, weights_namespace
from engine.devices import dtype_name
from engine.errors import KVPlanError
from tests.conftest import random_ids as tokens


def test_the_exact_constructors_stamp_exactness_and_the_weights(eng) -> None:
    ids = tokens(40, 40)
    fresh = snapshot(eng, ids)
    eng.generate(ids, max_new_tokens=1)
    cached = cached_snapshot(eng, ids)
    assert cached is not None
    namespace = f"{eng.source.digest}:{dtype_name(eng.dtype)}"
    assert weights_namespace(eng) == namespace
    assert (fresh.exact, fresh.namespace) == (cached.exact, cached.namespace) == (True, namespace)
    assert Snapshot(fresh.token_ids, fresh.k, fresh.v).exact is False  # built by hand: not exact


def test_rows_of_a_snapshot_that_is_not_exact_never_count_as_cached(eng) -> None:
    ids = tokens(50, 41)
    exact = snapshot(eng, ids[:32])
    assert assemble(eng, ids, [Reuse(exact, 0, 32), Compute(18)]).cached_tokens == 32
    # the same rows, handed in as not exact (e.g. copied out of an approximate window): stale, not cached
    unsure = dataclasses.replace(exact, exact=False)
    a = assemble(eng, ids, [Reuse(unsure, 0, 32), Compute(18)])
    assert (a.cached_tokens, a.stale_tokens, a.computed_tokens) == (0, 32, 18)


def test_a_snapshot_of_other_weights_or_dtype_is_refused(eng, tiny_dir) -> None:
    ids = tokens(40, 42)
    other_dtype = "float32" if dtype_name(eng.dtype) == "bfloat16" else "bfloat16"
    other = engine.load(str(tiny_dir("qwen2")), device=str(eng.device), dtype=other_dtype, cache_tokens=256)
    theirs = snapshot(other, ids[:32])
    digest = eng.source.digest[:16]
    both = f"weights {digest}:{other_dtype} .* weights {digest}:{dtype_name(eng.dtype)}"
    with pytest.raises(KVPlanError, match=both):
        assemble(eng, ids, [Reuse(theirs, 0, 32), Compute(8)])
    mine = snapshot(eng, ids[:32])
    with pytest.raises(KVPlanError, match="weights not recorded"):
        assemble(eng, ids, [Reuse(Snapshot(mine.token_ids, mine.k, mine.v), 0, 32), Compute(8)])
