"""The FLOP model: parameter counts match the models' published figures and our own modules."""

from __future__ import annotations

import pytest
import torch

from engine.inspect.flops import forward_flops, ideal_cached_ratio, matmul_params
from engine.model.decoder import Decoder
from engine.model.presets import SYNTHETIC_PRESETS


@pytest.mark.parametrize(
    ("preset", "billions"),  # "Number of Parameters (Non-Embedding)" on the Qwen model cards
    [("qwen2.5-0.5b", 0.36), ("qwen2.5-1.5b", 1.31), ("qwen2.5-7b", 6.53), ("qwen3-0.6b", 0.44)],
)
def test_matmul_params_match_the_model_cards(preset: str, billions: float) -> None:
    assert round(matmul_params(SYNTHETIC_PRESETS[preset]) / 1e9, 2) == billions


@pytest.mark.parametrize("preset", ["qwen2.5-0.5b", "qwen3-0.6b"])
def test_matmul_params_count_the_decoder_matrices(preset: str) -> None:
    model = Decoder(SYNTHETIC_PRESETS[preset], torch.float32, torch.device("meta"))
    matrices = sum(
        p.numel() for name, p in model.named_parameters() if p.dim() == 2 and name not in ("embed", "lm_head")
    )
    assert matmul_params(model.config) == matrices


def test_forward_flops_add_up_over_positions() -> None:
    cfg = SYNTHETIC_PRESETS["qwen2.5-0.5b"]
    head = 2 * cfg.vocab_size * cfg.hidden_size
    per_step = [forward_flops(cfg, p, p + 1) - head for p in range(300)]
    assert forward_flops(cfg, 0, 300) - head == sum(per_step)
    assert forward_flops(cfg, 100, 300) - head == sum(per_step[100:])
    with pytest.raises(ValueError):
        forward_flops(cfg, 5, 5)


def test_ideal_cached_ratio() -> None:
    cfg = SYNTHETIC_PRESETS["qwen2.5-0.5b"]
    assert ideal_cached_ratio(cfg, 0, 64) == 1.0
    ratios = [ideal_cached_ratio(cfg, s, 128) for s in (512, 2048, 4096)]
    assert ratios == sorted(ratios, reverse=True) and all(0 < r < 1 for r in ratios)
    # With a long context, a new token attends to more keys than an average one: above V / (S + V).
    assert ideal_cached_ratio(cfg, 4096, 32) > 32 / 4128
