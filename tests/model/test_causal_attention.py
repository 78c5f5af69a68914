"""Causal attention after a prefix equals softmax attention written out, for every split of the keys into
cached and new, with grouped-query heads."""

from __future__ import annotations

import pytest
import torch

from engine.model.causal_attention import attention_with_lse, causal_attention, scattered_attention


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


def scattered_reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, positions: list[int]
) -> torch.Tensor:
    """Query i sees window rows [0, positions[i]], softmax written out in float64."""
    group = q.shape[1] // k.shape[0]
    kk, vv = k.double().repeat_interleave(group, 0), v.double().repeat_interleave(group, 0)
    scores = torch.einsum("thd,hsd->hts", q.double(), kk) / q.shape[-1] ** 0.5
    visible = torch.arange(k.shape[1])[None, :] <= torch.tensor(positions)[:, None]
    return torch.einsum("hts,hsd->thd", scores.masked_fill(~visible, float("-inf")).softmax(-1), vv).float()


def test_scattered_queries_see_every_row_up_to_their_position(monkeypatch) -> None:
    from engine.model import causal_attention as kernels

    gen = torch.Generator().manual_seed(3)
    positions = [2, 3, 9, 10, 11, 30]
    q = torch.randn(len(positions), 6, 16, generator=gen)
    k, v = torch.randn(2, 31, 16, generator=gen), torch.randn(2, 31, 16, generator=gen)
    expected = scattered_reference(q, k, v, positions)
    assert (scattered_attention(q, k, v, torch.tensor(positions)) - expected).abs().max().item() <= 1e-5
    monkeypatch.setattr(kernels, "SCORE_BYTES", 4 * 6 * 31 * 2)  # two queries per chunk
    assert (scattered_attention(q, k, v, torch.tensor(positions)) - expected).abs().max().item() <= 1e-5


@pytest.mark.parametrize("causal", [False, True])
def test_kernels_without_native_grouped_heads_see_the_same_keys(causal: bool) -> None:
    """The arrangement CUDA's fused kernels need (query heads folded into rows without a mask, new K/V
    repeated per head with it) gives what broadcasting the KV heads gives."""
    gen = torch.Generator().manual_seed(4)
    q = torch.randn(1, 6, 10, 16, generator=gen)
    k, v = torch.randn(1, 2, 10, 16, generator=gen), torch.randn(1, 2, 10, 16, generator=gen)
    out, lse = attention_with_lse(q, k, v, causal, native_gqa=True)
    folded, folded_lse = attention_with_lse(q, k, v, causal, native_gqa=False)
    assert (out - folded).abs().max().item() <= 1e-6 and (lse - folded_lse).abs().max().item() <= 1e-5


def test_the_merge_after_a_prefix_adds_no_half_precision_rounding() -> None:
    """In bfloat16 the split-and-merge path is about as close to float64 as one fused call over the same
    keys (the merge runs in float32); merging in bfloat16 doubled the error."""
    gen = torch.Generator().manual_seed(5)
    start, new = 200, 40
    q = torch.randn(new, 8, 64, generator=gen)
    k, v = torch.randn(2, start + new, 64, generator=gen), torch.randn(2, start + new, 64, generator=gen)
    exact = reference(q, k, v, start)
    split = causal_attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), start).float()
    visible = torch.arange(start + new)[None, :] <= torch.arange(new)[:, None] + start
    one_call = (
        torch.nn.functional.scaled_dot_product_attention(
            q.bfloat16().transpose(0, 1)[None],
            k.bfloat16()[None],
            v.bfloat16()[None],
            attn_mask=visible,
            enable_gqa=True,
        )[0]
        .transpose(0, 1)
        .float()
    )
    split_err, one_err = (split - exact).abs().max().item(), (one_call - exact).abs().max().item()
    assert split_err <= 1.5 * one_err, (split_err, one_err)
