"""The kv-compose workload: blocks, the template split around them, and seeded layouts of 1-4 blocks."""

from __future__ import annotations

from engine.bench.workloads.skills import SKILLS, SYSTEM, layouts, skill_text, template_parts
from engine.loading.tokenizer import load_tokenizer, qwen_tokenizer_dir
from engine.prompts.chat import render_text


def test_template_parts_surround_the_blocks() -> None:
    tok = load_tokenizer(qwen_tokenizer_dir())
    before, after = template_parts(tok, "What now?")
    block = skill_text("refunds", 2)
    messages = [{"role": "system", "content": SYSTEM + block}, {"role": "user", "content": "What now?"}]
    assert before + block + after == render_text(tok, messages)
    assert block.count("\n") == 1 + 2 * len(SKILLS["refunds"]) + 1


def test_layouts_cycle_one_to_four_distinct_blocks() -> None:
    lays = layouts(8, seed=1)
    assert [len(lay.skills) for lay in lays] == [1, 2, 3, 4, 1, 2, 3, 4]
    assert all(len(set(lay.skills)) == len(lay.skills) == len(lay.notes) for lay in lays)
    assert layouts(8, seed=1) == lays
