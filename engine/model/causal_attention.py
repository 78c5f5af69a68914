"""Causal attention of T new queries over one sequence's contiguous keys, the new ones last, on the cheapest
exact path: the plain forward from position 0 (the reference, attention maps) and forwards into a private
window (approximate assemblies: after its rows, or at scattered positions); and `merge`, the exact union of
two attentions by their log-sum-exps, which the paged backends share.

Shapes: q `[T, heads, head_dim]` at positions start.., k/v `[kv_heads, start + T, head_dim]` (the window's
layout). Query i sees keys [0, start + i]. Grouped-query attention without repeating the context's K/V:
SDPA's `enable_gqa`, or query heads grouped by their KV head.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

# CPU flash attention that also returns the log-sum-exp of each query's scores (public SDPA does not).
_flash_cpu = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
SCORE_BYTES = 2**28  # transient float32 scores of one masked call: scattered queries go in chunks of this


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
    elif q.device.type in ("cpu", "cuda"):
        out = _split_after_prefix(qh, kh, vh, start)
    else:  # no fused kernel returns the log-sum-exp here (MPS): one masked call over all keys
        visible = (
            torch.arange(start + t, device=q.device)[None, :]
            <= torch.arange(t, device=q.device)[:, None] + start
        )
        out = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=visible, enable_gqa=True)
    return out[0].transpose(0, 1)


def _split_after_prefix(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, start: int) -> torch.Tensor:
    """New queries over the cached keys (no mask) and over the new keys (square causal), merged exactly by
    their log-sum-exps (`merge`): the work of the FLOP model, where one masked call over all keys would
    compute every (query, key) score and read a mask, skipping nothing."""
    o_ctx, lse_ctx = attention_with_lse(q, k[:, :, :start], v[:, :, :start], causal=False)
    o_new, lse_new = attention_with_lse(q, k[:, :, start:], v[:, :, start:], causal=True)
    return merge(o_ctx, lse_ctx, o_new, lse_new)


def merge(o_a: torch.Tensor, lse_a: torch.Tensor, o_b: torch.Tensor, lse_b: torch.Tensor) -> torch.Tensor:
    """Attention over the union of two key sets from each one's output and log-sum-exp: softmax over the union
    weighs them e^lse_a : e^lse_b, so out = o_b + sigmoid(lse_a - lse_b) (o_a - o_b), computed in float32 (as
    vLLM's merge_attn_states does): a half-precision merge would add its own rounding to both outputs'."""
    weight = torch.sigmoid(lse_a - lse_b).unsqueeze(-1)
    out = torch.lerp(as_float32(o_b), as_float32(o_a), weight)
    return out if out.dtype == o_b.dtype else out.to(o_b.dtype)


def as_float32(x: torch.Tensor) -> torch.Tensor:
    """`x` in float32: itself where it is (no conversion dispatched; CPU decode merges per row, run and
    layer, where each no-op conversion was an op of its own)."""
    return x if x.dtype == torch.float32 else x.float()


def attention_with_lse(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, native_gqa: bool | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Output `[1, heads, T, head_dim]` and float32 log-sum-exp `[1, heads, T]` of a fused kernel: CPU flash
    attention, which broadcasts KV heads itself, or on CUDA the flash kernel (half precision) or the
    memory-efficient one (float32), which need one KV head per query head: without a mask the query heads of
    a group are folded into its rows (no K/V copy), with the causal mask the new K/V are repeated per head
    (T rows, not the context). `native_gqa=False` forces that arrangement (tested on CPU)."""
    h, t, kvh = q.shape[1], q.shape[2], k.shape[1]
    if native_gqa is None:
        native_gqa = q.device.type == "cpu"
    if native_gqa or h == kvh:
        return _fused(q, k, v, causal)
    group = h // kvh
    if not causal:  # every query sees every key: query heads of one KV head become more rows
        out, lse = _fused(q.reshape(1, kvh, group * t, q.shape[-1]), k, v, causal)
        return out.reshape(q.shape), lse.reshape(1, h, t)
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    return _fused(q, k, v, causal)


def _fused(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    if q.device.type == "cpu":
        out, lse = _flash_cpu(q, k, v, is_causal=causal)[:2]
    elif q.dtype in (torch.float16, torch.bfloat16) and q.shape[-1] <= 256:
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, causal)[:2]
    else:  # its log-sum-exp is padded to a multiple of 32 queries
        out, lse = torch.ops.aten._scaled_dot_product_efficient_attention(q, k, v, None, True, 0.0, causal)[
            :2
        ]
        lse = lse[..., : q.shape[2]]
    return out, as_float32(lse)


def scattered_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor
) -> torch.Tensor:
    """q `[T, heads, head_dim]` at ascending `positions`, k/v `[kv_heads, L, head_dim]` (window rows 0..L-1, the
    queries' own rows among them): query i sees rows [0, positions[i]]. `[T, heads, head_dim]`, computed in
    chunks of queries so that no call holds more than SCORE_BYTES of scores."""
    t, h, _ = q.shape
    length = k.shape[1]
    keys = torch.arange(length, device=q.device)
    step = max(1, SCORE_BYTES // (4 * h * length))
    outs = []
    for first in range(0, t, step):
        rows = slice(first, first + step)
        mask = keys[None, :] <= positions[rows, None].to(q.device)
        qh = q[rows].transpose(0, 1)[None]
        outs.append(F.scaled_dot_product_attention(qh, k[None], v[None], attn_mask=mask, enable_gqa=True))
    return torch.cat(outs, dim=2)[0].transpose(0, 1)
