"""The bundled SmolLM2 GGUF: dequantized by us, checked against transformers' own GGUF loader."""

from __future__ import annotations

from pathlib import Path

import torch

import engine
from engine.sources import _alias_path

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


def test_logits_match_transformers_gguf(smollm2_on_device, precision) -> None:
    """float32: within 1e-3 (both dequantize Q4_1); half precision: 3x transformers' own error in that dtype,
    measured here on the same model and prompt (tests/precision.py)."""
    from transformers import AutoModelForCausalLM

    path: Path = _alias_path("smollm2-135m")
    ref = AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    ids = smollm2_on_device.render([{"role": "system", "content": "You are terse."}] + QUESTION)
    with torch.no_grad():
        expected = ref(torch.tensor([ids])).logits[0]
    tol = 1e-3 if precision.exact else precision.logits_tol("smollm2-135m", model=ref, ids=ids)
    assert (
        precision.observe(
            "smollm2-135m", "logits", (smollm2_on_device.logits(ids).cpu() - expected).abs().max().item()
        )
        <= tol
    )


def test_greedy_answer_names_paris(smollm2_on_device) -> None:
    gen = smollm2_on_device.generate(QUESTION, max_new_tokens=24)
    assert "Paris" in gen.text
    assert gen.finish_reason == "stop"  # stopped at <|im_end|>, not at the length limit


def test_config_read_from_gguf_metadata(smollm2) -> None:
    c = smollm2.config
    assert (c.arch, c.hidden_size, c.num_layers, c.num_heads, c.num_kv_heads, c.head_dim) == (
        "llama",
        576,
        30,
        9,
        3,
        64,
    )
    assert c.tie_word_embeddings and c.rope_theta == 100000.0 and c.vocab_size == 49152
    assert smollm2.info["source"] == "gguf" and len(smollm2.info["weights_digest"]) == 64


def test_conversion_is_cached(smollm2, monkeypatch) -> None:
    """A second load reads the converted folder and never parses the GGUF again."""
    import gguf

    def refuse(*args, **kwargs):
        raise AssertionError("the GGUF was parsed again")

    monkeypatch.setattr(gguf, "GGUFReader", refuse)
    again = engine.load("smollm2-135m", device="cpu", cache_tokens=256)
    assert again.source.digest == smollm2.source.digest
