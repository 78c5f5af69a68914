"""`Decoder`: embedding, N x (RMSNorm, attention, RMSNorm, MLP) with residuals, final norm, LM head."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from engine.kv.step import StepContext
from engine.model.config import ModelConfig
from engine.model.layers import MLP, Attention, RMSNorm, empty_param, linear
from engine.model.rotary import Rotary


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig, layer: int, dtype: torch.dtype, device: torch.device) -> None:
        super().__init__()
        self.input_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, dtype, device)
        self.attn = Attention(cfg, layer, dtype, device)
        self.post_attn_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, dtype, device)
        self.mlp = MLP(cfg, dtype, device)

    def forward(
        self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor], ctx: StepContext
    ) -> torch.Tensor:
        """x `[T, hidden]` is updated in place (residual adds) and returned."""
        x.add_(self.attn(self.input_norm(x), rope, ctx))
        return x.add_(self.mlp(self.post_attn_norm(x)))


class Decoder(nn.Module):
    def __init__(self, cfg: ModelConfig, dtype: torch.dtype, device: torch.device) -> None:
        super().__init__()
        self.config = cfg
        self.embed = empty_param(cfg.vocab_size, cfg.hidden_size, dtype=dtype, device=device)
        self.layers = nn.ModuleList(DecoderLayer(cfg, i, dtype, device) for i in range(cfg.num_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, dtype, device)
        # A tied head shares the embedding matrix; an untied one has its own.
        self.lm_head = (
            self.embed
            if cfg.tie_word_embeddings
            else empty_param(cfg.vocab_size, cfg.hidden_size, dtype=dtype, device=device)
        )
        self.rope = Rotary(
            cfg.head_dim, cfg.rope_theta, cfg.max_position_embeddings, device, cfg.rope_scaling
        )

    @torch.inference_mode()
    def forward(
        self, token_ids: torch.Tensor, ctx: StepContext, logits_rows: slice | torch.Tensor = slice(-1, None)
    ) -> torch.Tensor:
        """Run the step's token rows (see StepContext) and return float32 logits `[rows, vocab]` for the chosen
        rows (a slice or row indices): only those go through the LM head (the last one, for generation)."""
        rope = self.rope.at(ctx.positions(token_ids.device), self.embed.dtype)  # once, for every layer
        x = F.embedding(token_ids, self.embed)  # a new tensor: the layers add to it in place
        for layer in self.layers:
            x = layer(x, rope, ctx)
        x = self.norm(x[logits_rows])
        return linear(x, self.lm_head).float()
