"""bench needle on a tiny model: token spans of the asked records, the answering row, the attention
bookkeeping against the plain capture, cells and files, and lengths refused by name."""

from __future__ import annotations

import argparse
import json

import pytest
import torch

from engine.bench.__main__ import main
from engine.bench.commands.needle import answer_row, ask, plan, render, token_span
from engine.errors import ContextOverflowError, PromptError
from engine.inspect.attention import capture


def _args(**changes) -> argparse.Namespace:
    base = dict(lengths=[200], positions=["top", "end"], facts=2, seed=0, max_new_tokens=4, top_heads=3)
    return argparse.Namespace(**base | changes)


@pytest.fixture(scope="module")
def tiny(tiny_dir, load):
    return load(tiny_dir("qwen2", tokenizer=True), cache_tokens=4096)


def test_token_span_covers_overlapping_tokens() -> None:
    offsets = [(0, 3), (3, 4), (4, 9), (9, 10), (10, 14)]
    assert token_span(offsets, 3, 9) == (1, 3)
    assert token_span(offsets, 5, 10) == (2, 4)  # a token straddling the start counts


def test_record_spans_decode_to_the_records(tiny) -> None:
    (cell, *_) = plan(tiny, _args())
    prompt = render(tiny, cell.log, cell.log.facts[0])
    for (a, b), i in zip(prompt.spans, cell.log.facts, strict=True):
        assert tiny.tokenizer.decode(prompt.ids[a:b]).strip() == cell.log.records[i].line()


def test_shares_are_the_answering_rows_attention(tiny) -> None:
    cells = plan(tiny, _args())
    first = ask(tiny, cells[0], 0, _args())
    second = ask(tiny, cells[0], 1, _args())
    assert second["cached_tokens"] > 0  # the log is served from the cache to the second question
    prompt = render(tiny, cells[0].log, cells[0].log.facts[1])
    gen = tiny.generate(prompt.ids, max_new_tokens=4, stop=["\n"]).token_ids  # greedy: the same answer
    row = len(prompt.ids) - 1 + second["answer_row"]
    ids = prompt.ids + gen[: max(0, second["answer_row"])]
    maps = capture(tiny.model, tiny.prompts, tiny.prompts.rendered(ids), rows=[row])
    a, b = second["fact_tokens"]
    plain = maps.probs[:, :, 0, a:b].sum(-1)  # [layers, heads]
    assert torch.allclose(torch.tensor(second["share_layer_head"]), plain, atol=1e-5)
    assert second["share_by_layer"] == pytest.approx(plain.mean(-1).tolist(), abs=1e-5)
    assert second["uniform_share"] == pytest.approx((b - a) / (row + 1))
    assert len(first["other_facts_share_by_layer"]) == tiny.config.num_layers


def test_answer_row_is_the_token_holding_the_number(tiny) -> None:
    ids = tiny.tokenizer.encode("It is 47 tubs", add_special_tokens=False)
    k = answer_row(tiny, ids, len("It is "))
    assert tiny.tokenizer.decode(ids[k:]).lstrip().startswith("4")
    assert answer_row(tiny, ids, -1) == 0


def test_lengths_over_the_window_are_refused_by_name(tiny) -> None:
    window = tiny.config.max_position_embeddings
    with pytest.raises(ContextOverflowError, match=f"--lengths {window}: a log of {window} tokens"):
        plan(tiny, _args(lengths=[200, window]))
    with pytest.raises(ContextOverflowError, match=f"--lengths {window - 20}: the prompt with its question"):
        plan(tiny, _args(lengths=[window - 20], positions=["top"]))
    with pytest.raises(PromptError, match="--lengths 64: 8 facts alone take"):
        plan(tiny, _args(lengths=[64], facts=8))


def test_a_run_writes_cells_questions_and_plots(tiny_dir, tmp_path) -> None:
    out = tmp_path / "run"
    model = str(tiny_dir("qwen2", tokenizer=True))
    argv = ["needle", "--model", model, "--lengths", "150", "250", "--positions", "top", "middle"]
    assert main([*argv, "--facts", "2", "--max-new-tokens", "3", "--out", str(out)]) == 0
    data = json.loads((out / "needle.json").read_text())
    cells = data["cells"]
    keys = [(c["length"], c["position"]) for c in cells]
    assert keys == [(150, "top"), (150, "middle"), (250, "top"), (250, "middle")]
    for c in cells:
        shares = c["accuracy"] + c["wrong_number_share"] + c["not_number_share"]
        assert c["n"] == 2 and shares == pytest.approx(1)
        assert len(c["attention_share_by_layer"]) == 2 and len(c["top_heads"]) == 5
    assert len(data["questions"]) == 8
    for name in ("report.md", "questions.csv", "accuracy.png", "attention_by_layer.png"):
        assert (out / name).stat().st_size > 0
