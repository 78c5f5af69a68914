"""Causal attention of T new queries over a sequence's keys, the new ones last: a cold prefill, a prefill after
a cached prefix, or a decode step, each on the cheapest exact path.

Shapes: q `[T, heads, head_dim]` at positions start.., k/v `[kv_heads, start + T, head_dim]` (the window's
layout). Query i sees keys [0, start + i]. Grouped-query attention without repeating K/V: SDPA's `enable_gqa`,
or query heads grouped by their KV head.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

# CPU flash attention that also returns the log-sum-exp of each query's scores (public SDPA does not).
_flash_cpu = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, start: int) -> torch.Tensor:
    """Attention output `[T, heads, head_dim]` (see the module docstring)."""
    t, h, d = q.shape
    kvh = k.shape[0]
    if t == 1:  # decode: the query sees every key; each KV head serves its group of query heads
        out = F.scaled_dot_product_attention(q.view(1, kvh, h // kvh, d), k[None], v[None])
        return out.reshape(1, h, d)
    qh, kh, vh = q.transpose(0, 1)[None], k[None], v[None]
    if start == 0:
        out = F.scaled_dot_product_attention(qh, kh, vh, is_causal=True, enable_gqa=True)
    elif q.device.type == "cpu":
        out = _split_after_prefix(qh, kh, vh, start)
    else:  # query i sits at position start + i and sees keys 0..start+i
        mask = (
            torch.arange(start + t, device=q.device)[None, :]
            <= torch.arange(t, device=q.device)[:, None] + start
        )
        out = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=mask, enable_gqa=True)
    return out[0].transpose(0, 1)


def _split_after_prefix(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, start: int) -> torch.Tensor:
    """New queries over the cached keys (no mask) and over the new keys (square causal), merged exactly by
    their log-sum-exps: the work of the FLOP model, where one masked call over all keys would compute every
    (query, key) score and read a mask, skipping nothing.

    With o_c, l_c and o_n, l_n the two outputs and log-sum-exps, softmax over the union weighs them
    e^l_c : e^l_n, so out = o_n + sigmoid(l_c - l_n) (o_c - o_n)."""
    o_ctx, lse_ctx = _flash_cpu(q, k[:, :, :start], v[:, :, :start])
    o_new, lse_new = _flash_cpu(q, k[:, :, start:], v[:, :, start:], is_causal=True)
    weight = torch.sigmoid(lse_ctx - lse_new).unsqueeze(-1).to(o_new.dtype)
    return o_new.lerp_(o_ctx, weight)
