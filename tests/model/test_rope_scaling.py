"""RoPE scaling (YaRN, Llama 3) against transformers: the scaled frequencies and magnitude factor, the cos/sin
tables out to 131,072 positions, and tiny random models whose 200-token prompts run far past their 64-token
original window, cold and with a cached prefix; the context length each scaling gives (GGUF's rope scaling:
tests/loading/test_gguf.py)."""

from __future__ import annotations

import math

import pytest
import torch
from transformers import AutoConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

import engine
from engine.errors import ContextOverflowError
from engine.model.config import ModelConfig
from engine.model.presets import SYNTHETIC_PRESETS
from engine.model.rope_scaling import Yarn
from engine.model.rotary import Rotary
from tests.conftest import SCALED_CONTEXT, build_hf_model, scaled_overrides
from tests.conftest import random_ids as tokens
from tests.precision import assert_same_greedy_run

QWEN = {"architectures": ["Qwen2ForCausalLM"], "hidden_size": 896, "num_attention_heads": 14}
LLAMA = {"architectures": ["LlamaForCausalLM"], "hidden_size": 2048, "num_attention_heads": 32}
SHAPE = {"num_key_value_heads": 2, "intermediate_size": 64, "num_hidden_layers": 1, "vocab_size": 64}
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
LLAMA31 = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}
CONFIGS = [
    pytest.param(
        QWEN | {"rope_theta": 1e6, "max_position_embeddings": 32768, "rope_scaling": YARN}, id="qwen2.5 yarn"
    ),
    pytest.param(
        QWEN
        | {"max_position_embeddings": 32768}
        | {"rope_parameters": YARN | {"rope_theta": 1e6, "truncate": False, "beta_fast": 16.0}},
        id="yarn untruncated, beta_fast 16",
    ),
    pytest.param(
        QWEN | {"rope_theta": 1e6, "rope_scaling": YARN | {"mscale": 0.707, "mscale_all_dim": 1.0}},
        id="yarn mscale / mscale_all_dim",
    ),
    pytest.param(
        QWEN | {"max_position_embeddings": 65536, "rope_scaling": YARN | {"factor": None}},
        id="yarn factor from the lengths",
    ),
    pytest.param(LLAMA | {"rope_theta": 5e5, "rope_scaling": LLAMA31}, id="llama 3.1"),
    pytest.param(LLAMA | {"rope_theta": 5e5, "rope_scaling": LLAMA31 | {"factor": 32.0}}, id="llama 3.2"),
]


def reference(d: dict) -> tuple[torch.Tensor, float, AutoConfig]:
    """transformers' inverse frequencies and cos/sin magnitude for a config.json dict."""
    hf = AutoConfig.for_model("llama" if "Llama" in d["architectures"][0] else "qwen2", **d | SHAPE)
    inv_freq, magnitude = ROPE_INIT_FUNCTIONS[hf.rope_parameters["rope_type"]](hf, "cpu")
    return inv_freq, magnitude, hf


@pytest.mark.parametrize("d", CONFIGS)
def test_frequencies_and_magnitude_match_transformers(d: dict) -> None:
    inv_freq, magnitude, _ = reference(d)
    cfg = ModelConfig.from_hf(d | SHAPE)
    rope = Rotary(cfg.head_dim, cfg.rope_theta, 8, torch.device("cpu"), cfg.rope_scaling)
    assert torch.allclose(rope.inv_freq, inv_freq, rtol=1e-6, atol=0)
    assert cfg.rope_scaling is not None and cfg.rope_scaling.attention_factor == pytest.approx(magnitude)
    assert not torch.allclose(
        rope.inv_freq, Rotary(cfg.head_dim, cfg.rope_theta, 8, torch.device("cpu")).inv_freq
    )


def test_tables_equal_transformers_rotary_embedding_to_131072() -> None:
    """YaRN's magnitude factor is in cos and sin, as in transformers, at every position of the long context."""
    from transformers.models.qwen2.modeling_qwen2 import Qwen2RotaryEmbedding

    d = QWEN | {"rope_theta": 1e6, "max_position_embeddings": 32768, "rope_scaling": YARN}
    _, _, hf = reference(d)
    positions = torch.arange(0, 131072, 4093)
    cos, sin = Qwen2RotaryEmbedding(hf)(torch.zeros(1), positions[None])
    cfg = ModelConfig.from_hf(d | SHAPE)
    ours_cos, ours_sin = Rotary(
        cfg.head_dim, cfg.rope_theta, 131072, torch.device("cpu"), cfg.rope_scaling
    ).at(positions, torch.float32)
    half = cfg.head_dim // 2  # ours are rotate-half's tables over the whole head: (cos, cos), (-sin, sin)
    assert torch.allclose(ours_cos[:, 0], cos[0], atol=1e-6, rtol=0)
    assert torch.allclose(ours_sin[:, 0, :half], -sin[0, :, :half], atol=1e-6, rtol=0)
    assert torch.allclose(ours_sin[:, 0, half:], sin[0, :, half:], atol=1e-6, rtol=0)
    assert cos.abs().max() > 1.1  # the magnitude factor, 1 + 0.1 ln 4


def test_rope_scaling_applies_beside_default_rope_parameters() -> None:
    """Qwen's model cards add `rope_scaling` to a config.json whose `rope_parameters` say default RoPE:
    transformers applies rope_scaling (with the same rope_theta here), and so does the engine."""
    d = QWEN | {
        "rope_parameters": {"rope_type": "default", "rope_theta": 1e6},
        "rope_scaling": YARN | {"rope_theta": 1e6},
        "max_position_embeddings": 32768,
    }
    inv_freq, _, _ = reference(d)
    cfg = ModelConfig.from_hf(d | SHAPE)
    assert isinstance(cfg.rope_scaling, Yarn) and cfg.rope_theta == 1e6
    rope = Rotary(cfg.head_dim, cfg.rope_theta, 8, torch.device("cpu"), cfg.rope_scaling)
    assert torch.allclose(rope.inv_freq, inv_freq, rtol=1e-6, atol=0)


def test_context_length_of_each_scaling() -> None:
    """YaRN: factor x the original window, as vLLM derives it (Qwen's configs keep max_position_embeddings at
    the original length); Llama 3: max_position_embeddings, which its configs set to the scaled length."""
    qwen3 = QWEN | {"max_position_embeddings": 40960, "rope_scaling": YARN}
    assert ModelConfig.from_hf(qwen3 | SHAPE).max_position_embeddings == 131072
    llama = LLAMA | {"max_position_embeddings": 131072, "rope_scaling": LLAMA31}
    assert ModelConfig.from_hf(llama | SHAPE).max_position_embeddings == 131072
    for name in ("qwen2.5-0.5b-128k", "qwen2.5-7b-128k", "qwen3-0.6b-128k"):
        cfg = SYNTHETIC_PRESETS[name]
        assert cfg.max_position_embeddings == 131072 and cfg.rope_scaling == Yarn(
            4.0, 32768, attention_factor=1 + 0.1 * math.log(4)
        )
        assert ModelConfig.from_hf(cfg.to_hf()) == cfg  # what a GGUF conversion writes reads back the same


KINDS = [("qwen2", "yarn"), ("qwen3", "yarn"), ("llama", "llama3"), ("llama", "yarn")]


@pytest.fixture(scope="module", params=KINDS, ids=[f"{k}-{s}" for k, s in KINDS])
def scaled(request, tiny_dir, load, precision):
    """(kind, transformers in float32, ours with a prefix cache, logits tolerance, cached tolerance)"""
    kind, scaling = request.param
    ref = build_hf_model(kind, **scaled_overrides(scaling))
    name = f"{kind}-{scaling}"
    ours = load(tiny_dir(kind, scaling=scaling), block_size=16, cache_tokens=1024)
    return name, ref, ours, precision.logits_tol(name, model=ref), precision.cache_tol(name)


def test_logits_match_transformers_past_the_original_window(scaled, precision) -> None:
    name, ref, ours, tol, _ = scaled
    ids = tokens(200, 21)  # positions 0..199: the original window is 64
    with torch.no_grad():
        expected = ref(torch.tensor([ids])).logits[0]
    got = ours.logits(ids).cpu()
    assert precision.observe(name, "logits", (got - expected).abs().max().item()) <= tol


def test_cached_equals_cold_past_the_original_window(scaled) -> None:
    """A prefix of 160 tokens cached, 40 new, 8 decoded: all past the original window, as a cold run."""
    _, _, ours, _, cache_tol = scaled
    ids = tokens(200, 22)
    ours.generate(ids[:170], max_new_tokens=1)
    warm = ours.generate(ids, max_new_tokens=8, return_logits=True)
    cold = ours.generate(ids, max_new_tokens=8, return_logits=True, cache=False)
    assert warm.usage.cached_tokens == 160
    assert_same_greedy_run(warm.token_ids, warm.logits, cold.token_ids, cold.logits, cache_tol)


def test_scaled_context_is_recorded_and_enforced(tiny_dir) -> None:
    e = engine.load(str(tiny_dir("qwen2", scaling="yarn")), device="cpu", cache_tokens=512)
    assert e.config.max_position_embeddings == SCALED_CONTEXT == 4 * 64
    assert e.info["context_length"] == SCALED_CONTEXT and e.info["rope_scaling"]["rope_type"] == "yarn"
    with pytest.raises(ContextOverflowError, match=f"context of {SCALED_CONTEXT} tokens"):
        e.generate([5] * (SCALED_CONTEXT - 3), max_new_tokens=4)
