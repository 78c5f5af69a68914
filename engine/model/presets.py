"""Exact shapes of real models, for `synthetic:<preset>` runs with seeded random weights, and one tiny shape.

Timing does not depend on weight values, so these give the real models' prefill and decode cost with
no download. Attention patterns and answers do depend on them: never analyse synthetic weights.
`qwen2.5-tiny` is no real model's shape: 2 layers of width 64 under Qwen2.5's vocabulary and 32,768-token
context, so a run served with Qwen's tokenizer and template counts the tokens, cached tokens and misses
Qwen2.5 would, at a prefill far shorter than 0.5B's (the agents' sessions on a slow CPU).
"""

from __future__ import annotations

from engine.model.config import ModelConfig

# What Qwen's model cards add to config.json for 131,072-token contexts (Qwen2.5 and Qwen3 alike).
QWEN_YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}


def _qwen2(hidden: int, layers: int, heads: int, kv: int, inter: int, vocab: int, tied: bool) -> ModelConfig:
    return ModelConfig(
        arch="qwen2",
        vocab_size=vocab,
        hidden_size=hidden,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=kv,
        head_dim=hidden // heads,
        intermediate_size=inter,
        rope_theta=1_000_000.0,
        rms_norm_eps=1e-6,
        max_position_embeddings=32768,
        tie_word_embeddings=tied,
        qkv_bias=True,
        o_bias=False,
        mlp_bias=False,
        qk_norm=False,
    )


SYNTHETIC_PRESETS: dict[str, ModelConfig] = {
    "qwen2.5-0.5b": _qwen2(896, 24, 14, 2, 4864, 151936, tied=True),
    "qwen2.5-1.5b": _qwen2(1536, 28, 12, 2, 8960, 151936, tied=True),
    "qwen2.5-7b": _qwen2(3584, 28, 28, 4, 18944, 152064, tied=False),
    "qwen2.5-tiny": _qwen2(64, 2, 4, 2, 128, 151936, tied=True),
    "qwen3-0.6b": ModelConfig(
        arch="qwen3",
        vocab_size=151936,
        hidden_size=1024,
        num_layers=28,
        num_heads=16,
        num_kv_heads=8,
        head_dim=128,
        intermediate_size=3072,
        rope_theta=1_000_000.0,
        rms_norm_eps=1e-6,
        max_position_embeddings=40960,
        tie_word_embeddings=True,
        qkv_bias=False,
        o_bias=False,
        mlp_bias=False,
        qk_norm=True,
    ),
}


def _long(cfg: ModelConfig) -> ModelConfig:
    """The model as its config.json reads with Qwen's YaRN added: a context of 4 x 32,768 = 131,072 tokens."""
    return ModelConfig.from_hf(cfg.to_hf() | {"rope_scaling": QWEN_YARN})


SYNTHETIC_PRESETS |= {
    f"{name}-128k": _long(SYNTHETIC_PRESETS[name]) for name in ("qwen2.5-0.5b", "qwen2.5-7b", "qwen3-0.6b")
}
