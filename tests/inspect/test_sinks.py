"""Sink shares (engine/inspect/sinks.py): equal to transformers' eager attention, causal, summarised correctly."""

from __future__ import annotations

import pytest
import torch

from engine.bench.workloads.sink_prompts import PROMPTS
from engine.errors import PromptError
from engine.inspect.sinks import sink_rows, summary, transformers_rows


@pytest.fixture(scope="module")
def fixed(smollm2) -> list[int]:
    return smollm2.render(PROMPTS["fixed"])


def test_shares_match_transformers_eager(smollm2, fixed) -> None:
    from transformers import AutoModelForCausalLM

    reference = AutoModelForCausalLM.from_pretrained(
        str(smollm2.source.weights_dir), dtype=torch.float32, attn_implementation="eager"
    ).eval()
    first, first_k, _ = sink_rows(smollm2.model, fixed, 9, 4)
    ref_first, ref_first_k = transformers_rows(reference, fixed, 9, 4)
    assert first.shape == (30, 9, len(fixed) - 9)
    assert (first - ref_first).abs().max().item() <= 1e-4
    assert (first_k - ref_first_k).abs().max().item() <= 1e-4


def test_a_prefix_has_the_first_rows_of_the_whole(smollm2, fixed) -> None:
    """Causality, which the by-length statistics rely on: a prefix's rows are the whole prompt's first
    rows."""
    whole, _, _ = sink_rows(smollm2.model, fixed, 9, 4)
    prefix, _, _ = sink_rows(smollm2.model, fixed[:20], 9, 4)
    assert torch.allclose(prefix, whole[..., :11], atol=1e-5)


def test_summary_statistics() -> None:
    share = torch.tensor([[0.0, 0.02], [0.4, 0.6], [0.9, 0.7]])  # 3 layers x 2 heads
    s = summary(share, 0.3)
    assert s["per_layer"] == pytest.approx([0.01, 0.5, 0.8])
    assert (s["mean"], s["median"], s["max"], s["max_layer"]) == pytest.approx((1.31 / 3, 0.5, 0.8, 2))
    assert s["near_zero_layers"] == [0]
    assert s["heads_above_eps"] == pytest.approx(4 / 6) and s["heads_above_0.5"] == pytest.approx(3 / 6)


def test_a_prompt_without_rows_past_min_row_is_refused(smollm2) -> None:
    with pytest.raises(PromptError, match="no rows at or past --min-row 9"):
        sink_rows(smollm2.model, [1, 2, 3], 9, 4)
