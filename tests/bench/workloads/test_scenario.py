"""Scenarios are deterministic for a seed and sized in the model's own tokens."""

from __future__ import annotations

from engine.bench.workloads.scenario import SCALES, build_scenario
from engine.loading.tokenizer import load_tokenizer, qwen_tokenizer_dir


def test_seeded_and_sized() -> None:
    tok = load_tokenizer(qwen_tokenizer_dir())
    a, b, c = (build_scenario(tok, "small", seed) for seed in (0, 0, 1))
    assert a == b and a != c
    sizes = SCALES["small"]
    assert len(a.turns) == sizes["turns"] and len(a.tools) == sizes["tools"]
    assert len(tok(a.policies).input_ids) >= sizes["system_tokens"]
    assert all(len(tok(t.result).input_ids) >= sizes["result_tokens"] for t in a.turns)
    assert len({t.time for t in a.turns}) == len(a.turns)  # the time changes every request
    big = build_scenario(tok, "small", 0, turns=3, system_tokens=900)
    assert len(big.turns) == 3 and len(tok(big.policies).input_ids) >= 900
