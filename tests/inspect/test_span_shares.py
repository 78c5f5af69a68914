"""Span shares read from the engine's own steps: equal to the plain attention capture, whether the prompt
ran cold, after a cached prefix, or as decode rows; the hook leaves nothing behind."""

from __future__ import annotations

import pytest
import torch

from engine.inspect.attention import capture
from engine.inspect.span_shares import SpanShares, observing
from tests.conftest import random_ids

SPANS = [(5, 21), (40, 47), (0, 1)]


def _plain(eng, ids: list[int], row: int) -> torch.Tensor:
    """[spans, layers, heads] from the attention capture (a plain forward from position 0)."""
    probs = capture(eng.model, eng.prompts, eng.prompts.rendered(ids), rows=[row]).probs[:, :, 0]
    return torch.stack([probs[..., a:b].sum(-1) for a, b in SPANS])


@pytest.mark.parametrize("cached", [False, True])
def test_shares_equal_the_plain_capture(eng, cache_tol, cached) -> None:
    prefix, question = random_ids(64, 1), random_ids(7, 2)
    if cached:  # the next request finds the prefix's blocks in the cache and computes only the rest
        eng.generate(prefix + random_ids(3, 3), max_new_tokens=1)
    ids = prefix + question
    watch = SpanShares(eng.model, SPANS, first=len(ids) - 1, rows=3)
    with observing(eng.model, watch):
        gen = eng.generate(ids, max_new_tokens=3)
    assert (gen.usage.cached_tokens > 0) == cached
    full = ids + gen.token_ids
    for offset in range(3):  # the last prompt row, then the rows of the first generated tokens
        row = len(ids) - 1 + offset
        assert torch.allclose(watch.at(row), _plain(eng, full, row), atol=cache_tol)
    assert set(watch.rows) == {len(ids) - 1, len(ids), len(ids) + 1}
    assert watch.at(len(ids) - 1).shape == (len(SPANS), eng.config.num_layers, eng.config.num_heads)


def test_hook_is_removed_and_unobserved_rows_refused(eng) -> None:
    ids = random_ids(20, 4)
    watch = SpanShares(eng.model, [(0, 4)], first=len(ids) - 1, rows=1)
    with observing(eng.model, watch):
        eng.generate(ids, max_new_tokens=1, cache=False)
    seen = dict(watch.rows)
    eng.generate(random_ids(30, 5), max_new_tokens=1, cache=False)  # outside the block: not observed
    assert watch.rows.keys() == seen.keys()
    with pytest.raises(RuntimeError, match="row 25 was not observed"):
        watch.at(25)
