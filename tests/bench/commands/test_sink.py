"""Sink analysis: the engine's numbers equal transformers' eager attention and the committed results."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
import torch

from engine.bench.commands.sink import measure, sink_rows, summary, transformers_rows
from engine.bench.workloads.sink_prompts import PROMPTS, load_prompt, variants
from engine.errors import PromptError

COMMITTED = Path(__file__).resolve().parents[3] / "results" / "sink-smollm2-135m-cpu" / "sink.json"


@pytest.fixture(scope="module")
def fixed(smollm2) -> list[int]:
    return smollm2.render(PROMPTS["fixed"])


def test_shares_match_transformers_eager(smollm2, fixed) -> None:
    from transformers import AutoModelForCausalLM

    reference = AutoModelForCausalLM.from_pretrained(
        str(smollm2.source.weights_dir), dtype=torch.float32, attn_implementation="eager"
    ).eval()
    first, first_k, _ = sink_rows(smollm2, fixed, 9, 4)
    ref_first, ref_first_k = transformers_rows(reference, fixed, 9, 4)
    assert first.shape == (30, 9, len(fixed) - 9)
    assert (first - ref_first).abs().max().item() <= 1e-4
    assert (first_k - ref_first_k).abs().max().item() <= 1e-4


def test_committed_numbers_reproduce(smollm2) -> None:
    committed = json.loads(COMMITTED.read_text())
    options = argparse.Namespace(**committed["environment"]["options"])
    records = [r for r in committed["records"] if r["prompt"] == "fixed"]
    assert len(records) == 2
    for r in records:
        ids = variants(smollm2, smollm2.render(PROMPTS["fixed"]))[r["variant"]]
        again = measure(smollm2, "fixed", r["variant"], ids, options, None)
        for key in ("token0", "first_k"):
            diff = torch.tensor(again[key]["layer_head"]) - torch.tensor(r[key]["layer_head"])
            assert diff.abs().max().item() <= 1e-4, (r["variant"], key)
        assert [k["position"] for k in again["strongest_key"]] == [k["position"] for k in r["strongest_key"]]


def test_a_prefix_has_the_first_rows_of_the_whole(smollm2, fixed) -> None:
    """Causality, which the by-length statistics rely on: a prefix's rows are the whole prompt's first
    rows."""
    whole, _, _ = sink_rows(smollm2, fixed, 9, 4)
    prefix, _, _ = sink_rows(smollm2, fixed[:20], 9, 4)
    assert torch.allclose(prefix, whole[..., :11], atol=1e-5)


def test_variants_with_and_without_a_leading_special_token(smollm2, fixed) -> None:
    chat = variants(smollm2, fixed)
    assert chat["leading special"] == fixed and chat["no leading special"] == fixed[1:]
    raw = smollm2.prompt_ids("Plain text, no special token.")
    text = variants(smollm2, raw)
    assert text["no leading special"] == raw and text["leading special"] == [
        smollm2.tokenizer.bos_token_id,
        *raw,
    ]


def test_summary_statistics() -> None:
    share = torch.tensor([[0.0, 0.02], [0.4, 0.6], [0.9, 0.7]])  # 3 layers x 2 heads
    s = summary(share, 0.3)
    assert s["per_layer"] == pytest.approx([0.01, 0.5, 0.8])
    assert (s["mean"], s["median"], s["max"], s["max_layer"]) == pytest.approx((1.31 / 3, 0.5, 0.8, 2))
    assert s["near_zero_layers"] == [0]
    assert s["heads_above_eps"] == pytest.approx(4 / 6) and s["heads_above_0.5"] == pytest.approx(3 / 6)


def test_bad_prompts_are_refused(smollm2, tmp_path) -> None:
    with pytest.raises(PromptError, match="neither a built-in"):
        load_prompt(smollm2, "poem")
    with pytest.raises(PromptError, match="does not exist"):
        load_prompt(smollm2, str(tmp_path / "missing.json"))
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(PromptError, match="not valid JSON"):
        load_prompt(smollm2, str(tmp_path / "bad.json"))
    with pytest.raises(PromptError, match="no rows at or past --min-row 9"):
        sink_rows(smollm2, [1, 2, 3], 9, 4)
