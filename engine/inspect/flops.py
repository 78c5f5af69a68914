"""Prefill FLOPs of a decoder, and the ideal cached/full time ratio that follows from them.

A token at position p (it attends to p + 1 keys) costs 2 x (non-embedding matmul parameters) for the
projections and the MLP, plus 4 x layers x heads x head_dim x (p + 1) for QK^T and AV. The LM head runs
once per forward (only the last token's logits are needed). Norms, RoPE, softmax and biases are left out:
they are O(hidden) per token, small next to the matmuls.
"""

from __future__ import annotations

from engine.model.config import ModelConfig


def matmul_params(cfg: ModelConfig) -> int:
    """Weights of every layer's q, k, v, o projections and gate, up, down matrices (no embedding, no head)."""
    q, kv = cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim
    attention = cfg.hidden_size * (q + 2 * kv) + q * cfg.hidden_size
    mlp = 3 * cfg.hidden_size * cfg.intermediate_size
    return cfg.num_layers * (attention + mlp)


def forward_flops(cfg: ModelConfig, start: int, end: int) -> int:
    """FLOPs to compute positions [start, end) with positions [0, start) already cached, LM head for the
    last one: a cold prefill is (0, n), a cached prefill (S, S + V), a decode step at context L is
    (L, L + 1)."""
    if not 0 <= start < end:
        raise ValueError(f"need 0 <= start < end, got start={start}, end={end}")
    keys = (end * (end + 1) - start * (start + 1)) // 2  # sum of (p + 1) over p in [start, end)
    attention = 4 * cfg.num_layers * cfg.num_heads * cfg.head_dim * keys
    return 2 * matmul_params(cfg) * (end - start) + attention + 2 * cfg.vocab_size * cfg.hidden_size


def ideal_cached_ratio(cfg: ModelConfig, cached: int, new: int) -> float:
    """Time of a prefill with `cached` tokens reused and `new` computed over the time of a full prefill of
    cached + new, if time were proportional to FLOPs."""
    return forward_flops(cfg, cached, cached + new) / forward_flops(cfg, 0, cached + new)
