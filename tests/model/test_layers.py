"""The decoder's linear layer: weight-first for a few rows on a CPU, F.linear otherwise; the same numbers. The
MLP, which keeps weight-first activations as columns: the same numbers as its three products by F.linear."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from engine.model.layers import MLP, WEIGHT_FIRST_ROWS, linear
from engine.model.presets import SYNTHETIC_PRESETS


@pytest.mark.parametrize("rows", [1, 2, 8, WEIGHT_FIRST_ROWS, WEIGHT_FIRST_ROWS + 1, 300])
@pytest.mark.parametrize("with_bias", [False, True])
def test_linear_equals_f_linear(rows: int, with_bias: bool) -> None:
    g = torch.Generator().manual_seed(rows)
    x, w = torch.randn(rows, 96, generator=g), torch.randn(200, 96, generator=g)
    b = torch.randn(200, generator=g) if with_bias else None
    got, ref = linear(x, w, b), F.linear(x, w, b)
    assert got.shape == ref.shape and got.is_contiguous()
    assert torch.allclose(got, ref, rtol=1e-5, atol=1e-5)
    exact = F.linear(x.double(), w.double(), None if b is None else b.double())
    assert (got.double() - exact).abs().max() <= 1e-4  # float32 rounding of a 96-term sum, no more


def test_linear_rows_of_a_batch_do_not_depend_on_their_neighbours() -> None:
    """A row computed among others (a batched decode step) equals the same row computed alone, to rounding."""
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(8, 64, generator=g), torch.randn(500, 64, generator=g)
    batched = linear(x, w)
    for i in range(8):
        assert torch.allclose(batched[i], linear(x[i : i + 1], w)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rows", [1, 2, 8, WEIGHT_FIRST_ROWS, WEIGHT_FIRST_ROWS + 1])
@pytest.mark.parametrize("with_bias", [False, True])
def test_mlp_equals_its_products_by_f_linear(rows: int, with_bias: bool) -> None:
    """Rows through `MLP` (weight-first as columns where `linear` multiplies weight-first) equal
    down(silu(gate(x)) * up(x)) by F.linear, to float rounding, row-major and contiguous."""
    cfg = replace(SYNTHETIC_PRESETS["qwen2.5-tiny"], hidden_size=48, intermediate_size=80, mlp_bias=with_bias)
    mlp, g = MLP(cfg, torch.float32, torch.device("cpu")), torch.Generator().manual_seed(rows)
    for param in mlp.parameters():
        param.copy_(torch.randn(param.shape, generator=g))
    x = torch.randn(rows, 48, generator=g)
    gate, up = (F.linear(x, w, b) for w, b in (mlp.gate, mlp.up))
    ref = F.linear(F.silu(gate) * up, mlp.down_weight, mlp.down_bias)
    got = mlp(x)
    assert got.shape == ref.shape and got.is_contiguous()
    assert torch.allclose(got, ref, rtol=1e-5, atol=1e-4)
