"""GGUF rope scaling against transformers with the same scaling in config.json: YaRN metadata, and Llama 3's
rope_freqs.weight as llama.cpp's converter writes it (read back to its parameters, any other tensor refused).
The refusals of GGUF rope keys the engine lacks are cases of test_gguf.py."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import engine
from engine.errors import UnsupportedModelError
from engine.loading.gguf import _LAYER_NAMES, _TOP_NAMES, ROPE_FREQS
from engine.model.config import ModelConfig
from engine.model.rope_scaling import Llama3, scaling_from_gguf
from tests.conftest import SCALINGS, build_hf_model, random_ids
from tests.loading.test_gguf import gguf_file


def llama_cpp_divisors(theta: float, head_dim: int, factor: float) -> list[float]:
    """rope_freqs.weight as llama.cpp's converter computes it for Llama 3 (its defaults: low_freq_factor 1,
    high_freq_factor 4, original context 8192; float64, stored as float32)."""
    out = []
    for i in range(0, head_dim, 2):
        wavelen = 2 * math.pi * theta ** (i / head_dim)
        if wavelen < 8192 / 4:
            out.append(1.0)
        elif wavelen > 8192 / 1:
            out.append(factor)
        else:
            smooth = (8192 / wavelen - 1) / (4 - 1)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32).tolist()


@pytest.mark.parametrize("factor", [8.0, 32.0])  # Llama 3.1 / 3.3 and Llama 3.2
def test_llama3_read_back_from_llama_cpp_divisors(factor: float) -> None:
    divisors = llama_cpp_divisors(5e5, 128, factor)
    assert scaling_from_gguf({}, "llama", 131072, 5e5, 128, divisors) == Llama3(factor, 1.0, 4.0, 8192)
    divisors[40] *= 1.01  # any other frequency factors: refused, never approximated
    with pytest.raises(UnsupportedModelError, match="rope_freqs.weight is not Llama 3 rope scaling"):
        scaling_from_gguf({}, "llama", 131072, 5e5, 128, divisors)


def llama_as_gguf(path: Path, model: Any, rope: dict[str, Any], rope_freqs: list[float] | None) -> Path:
    """A transformers Llama written as llama.cpp's converter writes it (float32, q/k rows permuted for its
    RoPE), with RoPE metadata `rope` (after "llama.") and, given, a rope_freqs.weight tensor."""
    c = model.config
    meta = {
        "block_count": c.num_hidden_layers,
        "embedding_length": c.hidden_size,
        "attention.head_count": c.num_attention_heads,
        "attention.head_count_kv": c.num_key_value_heads,
        "feed_forward_length": c.intermediate_size,
        "context_length": c.max_position_embeddings,
        "rope.freq_base": float(c.rope_parameters["rope_theta"]),
        "attention.layer_norm_rms_epsilon": float(c.rms_norm_eps),
        "vocab_size": c.vocab_size,
    }
    to_gguf = {hf: name for name, hf in _TOP_NAMES.items()}
    for name, hf in _LAYER_NAMES.items():
        to_gguf |= {f"model.layers.{i}.{hf}": f"blk.{i}.{name}" for i in range(c.num_hidden_layers)}
    tensors = {}
    for hf, tensor in model.state_dict().items():
        a = tensor.numpy()
        if hf.endswith(("q_proj.weight", "k_proj.weight")):
            heads = c.num_attention_heads if "q_proj" in hf else c.num_key_value_heads
            a = a.reshape(heads, 2, a.shape[0] // heads // 2, *a.shape[1:]).swapaxes(1, 2).reshape(a.shape)
        tensors[to_gguf[hf]] = np.ascontiguousarray(a)
    if rope_freqs is not None:
        tensors[ROPE_FREQS] = np.array(rope_freqs, dtype=np.float32)
    return gguf_file(path, {f"llama.{k}": v for k, v in (meta | rope).items()}, tensors)


GGUF_SCALINGS = [
    pytest.param(
        SCALINGS["yarn"],
        {
            "rope.scaling.type": "yarn",
            "rope.scaling.factor": 4.0,
            "rope.scaling.original_context_length": 64,
        },
        False,
        id="yarn metadata",
    ),
    pytest.param(
        {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}
        | {"original_max_position_embeddings": 8192},
        {},
        True,
        id="llama3 rope_freqs",
    ),
]


@pytest.mark.parametrize(("scaling", "rope", "freqs"), GGUF_SCALINGS)
def test_gguf_rope_scaling_matches_transformers(tmp_path, private_cache, scaling, rope, freqs) -> None:
    """A Llama GGUF with YaRN metadata, or with Llama 3's rope_freqs.weight, computes what transformers
    computes with that scaling in config.json, over a 200-token prompt (YaRN's original window: 64)."""
    ref = build_hf_model("llama", rope_scaling=dict(scaling), max_position_embeddings=16384 if freqs else 256)
    divisors = llama_cpp_divisors(10000.0, 16, 8.0) if freqs else None
    path = llama_as_gguf(tmp_path / "scaled.gguf", ref, rope, divisors)
    ours = engine.load(str(path), device="cpu", cache_tokens=512)
    expected_scaling = ModelConfig.from_hf(ref.config.to_dict()).rope_scaling
    assert expected_scaling is not None and ours.config.rope_scaling == expected_scaling
    ids = random_ids(200, 41)
    with torch.no_grad():
        expected = ref(torch.tensor([ids])).logits[0]
    assert (ours.logits(ids) - expected).abs().max().item() <= 1e-4
