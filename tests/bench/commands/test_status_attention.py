"""The status-bar experiment: its regions exist, its shares are shares, and the status block is seen."""

from __future__ import annotations

import pytest

from engine.bench.commands.status_attention import CALL_LABELS, CASES, TOOLS, run_case
from engine.prompts.regions import render_prompt


@pytest.fixture(scope="module")
def cases(smollm2):
    return {name: run_case(smollm2, messages, max_new_tokens=3) for name, messages in CASES.items()}


def test_call_records_and_status_have_regions(smollm2) -> None:
    labels = {r.label for r in render_prompt(smollm2.tokenizer, CASES["with status"], TOOLS).regions}
    assert set(CALL_LABELS) <= labels and "status" in labels and len(CALL_LABELS) == 6


def test_shares_are_shares(cases) -> None:
    for case in cases.values():
        for part in ("status", "calls"):
            for rows in ("last_row", "answer_rows"):
                shares = case[rows][part]
                values = shares["mean"] + shares["excl_token0"] + shares["max_head"]
                assert all(0.0 <= v <= 1.0 + 1e-6 for v in values)
        assert case["answer_tokens"] == 3 and case["call_tokens"] > 0


def test_status_block_draws_attention_only_when_present(cases) -> None:
    without, with_status = cases["without status"], cases["with status"]
    assert without["status_tokens"] == 0 and max(without["last_row"]["status"]["mean"]) == 0.0
    assert with_status["status_tokens"] > 0
    uniform = with_status["status_tokens"] / with_status["prompt_tokens"]
    mean = sum(with_status["last_row"]["status"]["mean"]) / len(with_status["last_row"]["status"]["mean"])
    assert mean > uniform  # measured: 0.22 on 6% of the tokens
