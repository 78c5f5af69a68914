"""One SDPA call as the torch backends arrange it per device (`attend`): CPU flash attention, which
broadcasts KV heads and returns log-sum-exps, or SDPA's fused kernels elsewhere, which want one KV head per
query head."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.nn.attention.bias import CausalBias

from engine.model.causal_attention import as_float32

_flash_cpu = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu  # returns the log-sum-exp too


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | CausalBias | None,
    causal: bool,
    native: bool,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Output `[B, heads, T, head_dim]` and, from CPU flash attention (`native`: it broadcasts KV heads
    itself), the float32 log-sum-exp `[B, heads, T]`. Elsewhere SDPA's fused kernels, which want one KV head
    per query head: under a mask (already folded, `TorchPlan._folded`) the query heads of a KV head are folded
    into its rows (no K/V copy); causal, the new K/V (T rows) are repeated per head; one sequence's
    lower-right causal bias goes to SDPA as it is, with `enable_gqa` (flash where it can run, no mask made)."""
    if native:
        out, lse = _flash_cpu(q, k, v, is_causal=causal, attn_mask=mask)[:2]
        return out, as_float32(lse)
    b, h, t, d = q.shape
    group = h // k.shape[1]
    if causal:
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True), None
    if isinstance(mask, CausalBias):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True), None
    out = F.scaled_dot_product_attention(q.reshape(b, k.shape[1], group * t, d), k, v, attn_mask=mask)
    return out.reshape(b, h, t, d), None  # CUDA's fused kernels return a transposed [B, T, H, D] buffer
