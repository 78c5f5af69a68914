"""`python -m engine.bench sink`: the committed results reproduce; prompts and their variants."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
import torch

from engine.bench.commands.sink import measure
from engine.bench.workloads.sink_prompts import PROMPTS, load_prompt, variants
from engine.errors import PromptError

COMMITTED = Path(__file__).resolve().parents[3] / "results" / "sink-smollm2-135m-cpu" / "sink.json"


@pytest.fixture(scope="module")
def fixed(smollm2) -> list[int]:
    return smollm2.render(PROMPTS["fixed"])


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


def test_variants_with_and_without_a_leading_special_token(smollm2, fixed) -> None:
    chat = variants(smollm2, fixed)
    assert chat["leading special"] == fixed and chat["no leading special"] == fixed[1:]
    raw = smollm2.prompt_ids("Plain text, no special token.")
    text = variants(smollm2, raw)
    assert text["no leading special"] == raw and text["leading special"] == [
        smollm2.tokenizer.bos_token_id,
        *raw,
    ]


def test_bad_prompts_are_refused(smollm2, tmp_path) -> None:
    with pytest.raises(PromptError, match="neither a built-in"):
        load_prompt(smollm2, "poem")
    with pytest.raises(PromptError, match="does not exist"):
        load_prompt(smollm2, str(tmp_path / "missing.json"))
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(PromptError, match="not valid JSON"):
        load_prompt(smollm2, str(tmp_path / "bad.json"))
