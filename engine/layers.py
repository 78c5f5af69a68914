"""The decoder's building blocks, written out: RMSNorm, RoPE, grouped-query attention, SwiGLU MLP.

All activations are `[T, ...]` for one sequence (batch size 1); positions are absolute.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from engine.config import ModelConfig
from engine.kv_cache import StepContext


def empty_param(*shape: int, dtype: torch.dtype, device: torch.device) -> nn.Parameter:
    # Uninitialised: every parameter is overwritten by the loader, which checks that none is missed.
    return nn.Parameter(torch.empty(shape, dtype=dtype, device=device), requires_grad=False)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float, dtype: torch.dtype, device: torch.device) -> None:
        super().__init__()
        self.eps = eps
        self.weight = empty_param(dim, dtype=dtype, device=device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Normalise in float32, as the reference does, then scale in the model's dtype.
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(x.dtype)


class Rotary:
    """Rotate-half RoPE with cos/sin tables for every position up to the context length, built once."""

    def __init__(self, head_dim: int, theta: float, max_positions: int, device: torch.device) -> None:
        inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
        freqs = torch.outer(torch.arange(max_positions, dtype=torch.float32), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.cos, self.sin = emb.cos().to(device), emb.sin().to(device)
        self.inv_freq = inv_freq.to(device)

    def __call__(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """x: [T, heads, head_dim]."""
        cos = self.cos[positions].unsqueeze(1).to(x.dtype)
        sin = self.sin[positions].unsqueeze(1).to(x.dtype)
        half = x.shape[-1] // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return x * cos + rotated * sin

    def shift(self, x: torch.Tensor, delta: int) -> torch.Tensor:
        """Move keys already rotated for positions p to positions p + delta (delta may be negative): RoPE
        composes, R(p + delta) = R(delta) R(p). x: [..., head_dim]; the angle is taken in float64."""
        if delta == 0:
            return x
        angle = delta * self.inv_freq.double()
        emb = torch.cat((angle, angle))
        cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        half = x.shape[-1] // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return x * cos + rotated * sin


class Attention(nn.Module):
    """GQA with fused QKV; Qwen2 q/k/v bias and Qwen3 per-head q/k RMSNorm (before RoPE) by config."""

    def __init__(self, cfg: ModelConfig, layer: int, dtype: torch.dtype, device: torch.device) -> None:
        super().__init__()
        self.layer = layer
        self.h, self.kvh, self.d = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        qkv_out = (self.h + 2 * self.kvh) * self.d
        self.qkv_weight = empty_param(qkv_out, cfg.hidden_size, dtype=dtype, device=device)
        self.qkv_bias = empty_param(qkv_out, dtype=dtype, device=device) if cfg.qkv_bias else None
        self.o_weight = empty_param(cfg.hidden_size, self.h * self.d, dtype=dtype, device=device)
        self.o_bias = empty_param(cfg.hidden_size, dtype=dtype, device=device) if cfg.o_bias else None
        norm = (lambda: RMSNorm(self.d, cfg.rms_norm_eps, dtype, device)) if cfg.qk_norm else None
        self.q_norm = norm() if norm else None
        self.k_norm = norm() if norm else None

    def forward(
        self, x: torch.Tensor, positions: torch.Tensor, rope: Rotary, ctx: StepContext
    ) -> torch.Tensor:
        t = x.shape[0]
        qkv = F.linear(x, self.qkv_weight, self.qkv_bias)
        q, k, v = qkv.split([self.h * self.d, self.kvh * self.d, self.kvh * self.d], dim=-1)
        q, k, v = q.view(t, self.h, self.d), k.view(t, self.kvh, self.d), v.view(t, self.kvh, self.d)
        if self.q_norm is not None and self.k_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = rope(q, positions), rope(k, positions)

        if ctx.kv is not None:
            ctx.kv.write(self.layer, ctx.write_slots, k, v)
        if ctx.window is not None:  # decoding, or a private window: the context is already contiguous
            k, v = ctx.window.extend(self.layer, ctx.start, k, v)
        elif ctx.kv is not None and ctx.start > 0:  # a cached prefix: attend over all the sequence holds
            k, v = ctx.kv.read(self.layer, ctx.read_slots)
        if ctx.observe is not None:
            ctx.observe(self.layer, q, k)
        out = self._attend(q, k, v, ctx.start)
        return F.linear(out.reshape(t, self.h * self.d), self.o_weight, self.o_bias)

    def _attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, start: int) -> torch.Tensor:
        """q [T, H, D] at positions start.., k/v [start+T, KVH, D] -> [T, H, D]; causal."""
        t, length, group = q.shape[0], k.shape[0], self.h // self.kvh
        if t == 1:
            # Decode: the query sees every key. Group query heads by their KV head so K/V are not copied.
            qg = q.view(self.kvh, group, self.d).unsqueeze(0)
            out = F.scaled_dot_product_attention(qg, k.transpose(0, 1)[None], v.transpose(0, 1)[None])
            return out.reshape(self.h, self.d).unsqueeze(0)
        # enable_gqa: each KV head serves its group of query heads inside SDPA, with no repeated K/V copies.
        qh, kh, vh = q.transpose(0, 1)[None], k.transpose(0, 1)[None], v.transpose(0, 1)[None]
        if start == 0:
            out = F.scaled_dot_product_attention(qh, kh, vh, is_causal=True, enable_gqa=True)
        else:  # query i sits at position start + i and sees keys 0..start+i
            mask = torch.arange(length, device=q.device)[None, :] <= (
                torch.arange(t, device=q.device)[:, None] + start
            )
            out = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=mask, enable_gqa=True)
        return out[0].transpose(0, 1)


class MLP(nn.Module):
    """SwiGLU: down(silu(gate(x)) * up(x)), with gate and up fused into one matrix."""

    def __init__(self, cfg: ModelConfig, dtype: torch.dtype, device: torch.device) -> None:
        super().__init__()
        self.inter = cfg.intermediate_size
        self.gate_up_weight = empty_param(2 * self.inter, cfg.hidden_size, dtype=dtype, device=device)
        self.gate_up_bias = empty_param(2 * self.inter, dtype=dtype, device=device) if cfg.mlp_bias else None
        self.down_weight = empty_param(cfg.hidden_size, self.inter, dtype=dtype, device=device)
        self.down_bias = empty_param(cfg.hidden_size, dtype=dtype, device=device) if cfg.mlp_bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Two GEMMs on row blocks of the fused matrix rather than one GEMM and a strided split: contiguous
        # outputs, and 2-5% faster prefill MLPs on CPU (measured side by side; decode is unchanged).
        w, b, n = self.gate_up_weight, self.gate_up_bias, self.inter
        gate = F.linear(x, w[:n], b[:n] if b is not None else None)
        up = F.linear(x, w[n:], b[n:] if b is not None else None)
        return F.linear(F.silu(gate) * up, self.down_weight, self.down_bias)
