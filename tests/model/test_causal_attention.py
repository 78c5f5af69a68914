"""Causal attention after a prefix equals softmax attention written out, for every split of the keys into
cached and new, with grouped-query heads."""

from __future__ import annotations

import pytest
import torch

from engine.model.causal_attention import causal_attention


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, start: int) -> torch.Tensor:
    """softmax(q k^T / sqrt(d) + causal mask) v in float64, K/V heads repeated for their query groups."""
    t, h, d = q.shape
    group = h // k.shape[0]
    kk, vv = k.double().repeat_interleave(group, 0), v.double().repeat_interleave(group, 0)
    scores = torch.einsum("thd,hsd->hts", q.double(), kk) / d**0.5
    visible = torch.arange(start + t)[None, :] <= torch.arange(t)[:, None] + start
    probs = scores.masked_fill(~visible, float("-inf")).softmax(-1)
    return torch.einsum("hts,hsd->thd", probs, vv).float()


@pytest.mark.parametrize(("start", "new"), [(0, 24), (1, 24), (16, 24), (40, 3), (40, 1), (0, 1)])
def test_matches_softmax_written_out(start: int, new: int) -> None:
    gen = torch.Generator().manual_seed(start * 100 + new)
    q = torch.randn(new, 6, 16, generator=gen)
    k, v = torch.randn(2, start + new, 16, generator=gen), torch.randn(2, start + new, 16, generator=gen)
    got = causal_attention(q, k, v, start)
    assert got.shape == q.shape
    assert (got - reference(q, k, v, start)).abs().max().item() <= 1e-5


def test_reads_strided_window_views() -> None:
    """The window hands attention views into a larger buffer: rows past start + T must not leak in."""
    gen = torch.Generator().manual_seed(0)
    buffer_k, buffer_v = torch.randn(2, 64, 16, generator=gen), torch.randn(2, 64, 16, generator=gen)
    q = torch.randn(8, 4, 16, generator=gen)
    got = causal_attention(q, buffer_k[:, :40], buffer_v[:, :40], 32)
    expected = reference(q, buffer_k[:, :40].clone(), buffer_v[:, :40].clone(), 32)
    assert (got - expected).abs().max().item() <= 1e-5
