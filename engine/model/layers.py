"""The decoder's building blocks, written out: RMSNorm, RoPE, grouped-query attention, SwiGLU MLP.

All activations are `[T, ...]`: the token rows of one step, of one or more sequences; positions are absolute.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from engine.kv.step import StepContext, WindowSpan
from engine.model.causal_attention import causal_attention, scattered_attention
from engine.model.config import ModelConfig
from engine.model.rotary import Rotary

# Rows up to which a CPU linear layer multiplies weight-first (see `linear`).
WEIGHT_FIRST_ROWS = 64


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """`F.linear(x, weight, bias)`, x `[rows, in]`. On a CPU, 2 to WEIGHT_FIRST_ROWS rows (a batch of decode
    tokens, a short prompt chunk) are multiplied weight-first, (W xᵀ)ᵀ. The GEMM F.linear calls there, with
    the weight as its right operand, costs 2-4x the one-row GEMV at 2-4 rows (re-packing the weight, by the
    look of it), which undoes what batching decode should save: a weight read once serves every row.
    Measured over streams of float32 weights of the Qwen2.5-0.5B and SmolLM2-135M shapes (2 AVX2 cores, MKL):
    F.linear over weight-first 1.8-4.3x at 2-4 rows, 1.07-2.5x at 8, 1.03-1.4x at 64, 0.90-1.28x at 128. One
    row stays a GEMV; more rows (a prefill chunk) and other devices keep F.linear. The same products and sums
    in another order: equal to float rounding."""
    if not weight_first(x):
        return F.linear(x, weight, bias)
    return columns(x.t(), weight, bias).t().contiguous()


def weight_first(x: torch.Tensor) -> bool:
    """Whether `linear` multiplies rows `x` weight-first: 2 to WEIGHT_FIRST_ROWS rows on a CPU."""
    return x.device.type == "cpu" and 2 <= x.shape[0] <= WEIGHT_FIRST_ROWS


def columns(xt: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """W xᵀ + b as columns `[out, rows]`, from xᵀ `[in, rows]`: the weight-first product before `linear`
    transposes it back to rows, for a caller that keeps its activations as columns until its last product."""
    out = torch.mm(weight, xt)
    return out if bias is None else out.add_(bias[:, None])


def empty_param(*shape: int, dtype: torch.dtype, device: torch.device) -> nn.Parameter:
    # Uninitialised: every parameter is overwritten by the loader, which checks that none is missed.
    return nn.Parameter(torch.empty(shape, dtype=dtype, device=device), requires_grad=False)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float, dtype: torch.dtype, device: torch.device) -> None:
        super().__init__()
        self.eps = eps
        self.weight = empty_param(dim, dtype=dtype, device=device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Normalised in float32, as the reference does (torch's rms_norm computes x * rsqrt(mean(x^2) + eps)
        # in float32 and rounds once to x's dtype: the same bits as those ops written out, in one call), then
        # scaled in the model's dtype, in place: the normalised tensor is always a new one.
        return F.rms_norm(x, (x.shape[-1],), eps=self.eps).mul_(self.weight)


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
        self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor], ctx: StepContext
    ) -> torch.Tensor:
        """x `[T, hidden]`: the step's token rows (see StepContext); `rope`: their cos, sin from `Rotary.at`."""
        t, h = x.shape[0], self.h
        heads = linear(x, self.qkv_weight, self.qkv_bias).view(t, h + 2 * self.kvh, self.d)
        # q and k heads side by side, rotated in one pass: [T, heads + kv_heads, head_dim]
        qk, v = heads[:, : h + self.kvh], heads[:, h + self.kvh :]
        if self.q_norm is not None and self.k_norm is not None:
            qk = torch.cat((self.q_norm(qk[:, :h]), self.k_norm(qk[:, h:])), dim=1)
        qk = Rotary.rotate(qk, *rope)
        q, k = qk[:, :h], qk[:, h:]
        if ctx.attention is not None:  # the paged path: new K/V written once, one dispatch for the batch
            assert ctx.kv is not None and ctx.write_slots is not None
            ctx.kv.write(self.layer, ctx.write_slots, k, v)
            if (
                ctx.observe is not None
            ):  # attention maps: each sequence's keys [0, start + length), from the pool
                self._observe_paged(q, ctx)
            out = ctx.attention.forward(self.layer, q, k, v)
        elif ctx.window is not None:
            out = window_attention(self.layer, q, k, v, ctx.window)
        else:  # one sequence from position 0, nothing cached
            if ctx.observe is not None:
                ctx.observe(self.layer, q, k)
            out = causal_attention(q, k.transpose(0, 1), v.transpose(0, 1), 0)
        return linear(out.reshape(t, self.h * self.d), self.o_weight, self.o_bias)

    def _observe_paged(self, q: torch.Tensor, ctx: StepContext) -> None:
        """The QKObserver of a paged step, per sequence: its query rows and every key they see."""
        assert ctx.kv is not None and ctx.observe is not None
        row = 0
        for span in ctx.spans:
            keys, _ = ctx.kv.read(self.layer, ctx.kv.slots(span.block_table, 0, span.start + span.length))
            ctx.observe(self.layer, q[row : row + span.length], keys)
            row += span.length


def window_attention(
    layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, span: WindowSpan
) -> torch.Tensor:
    """Attention of a forward into a private window (approximate experiments, see WindowSpan): the new K/V
    become its rows, and the queries read its rows up to theirs."""
    if span.positions is not None:
        keys, values = span.window.scatter(layer, span.positions, k, v)
        return scattered_attention(q, keys, values, span.positions)
    keys, values = span.window.extend(layer, span.start, k, v)
    return causal_attention(q, keys, values, span.start)


class MLP(nn.Module):
    """SwiGLU: down(silu(gate(x)) * up(x)), with gate and up fused into one matrix."""

    def __init__(self, cfg: ModelConfig, dtype: torch.dtype, device: torch.device) -> None:
        super().__init__()
        self.inter = cfg.intermediate_size
        self.gate_up_weight = empty_param(2 * self.inter, cfg.hidden_size, dtype=dtype, device=device)
        self.gate_up_bias = empty_param(2 * self.inter, dtype=dtype, device=device) if cfg.mlp_bias else None
        self.down_weight = empty_param(cfg.hidden_size, self.inter, dtype=dtype, device=device)
        self.down_bias = empty_param(cfg.hidden_size, dtype=dtype, device=device) if cfg.mlp_bias else None
        # Two GEMMs on row blocks of the fused matrix rather than one GEMM and a strided split: contiguous
        # outputs, and 2-5% faster prefill MLPs on CPU (measured side by side; decode is unchanged). The
        # blocks are views made once (the loader writes the weights in place).
        w, b, n = self.gate_up_weight, self.gate_up_bias, self.inter
        self.gate = (w[:n], b[:n] if b is not None else None)
        self.up = (w[n:], b[n:] if b is not None else None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not weight_first(x):
            gate, up = linear(x, *self.gate), linear(x, *self.up)
            return linear(F.silu(gate, inplace=True).mul_(up), self.down_weight, self.down_bias)
        # Weight-first, the activations stay columns `[intermediate, rows]` from gate and up to down: one
        # transpose copied (the output's, hidden wide) where `linear` would copy three (two intermediate
        # wide: 13 of a 64-token chunk's 270 ms on Qwen2.5-0.5B at 2,048 cached, float32, 2 AMX cores).
        xt = x.t()
        h = F.silu(columns(xt, *self.gate), inplace=True).mul_(columns(xt, *self.up))
        return columns(h, self.down_weight, self.down_bias).t().contiguous()
