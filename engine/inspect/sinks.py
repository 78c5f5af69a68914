"""Attention-sink shares: how much of each query row's attention lands on token 0 and on the first k tokens,
per layer and head, from the engine's own attention rows (`engine.inspect.attention.attention_rows`); the same shares
from `transformers`' eager attention as a reference; and their summaries over layers and prompt lengths.
Used by `python -m engine.bench sink`."""

from __future__ import annotations

import statistics
from typing import Any

import torch

from engine.errors import PromptError
from engine.inspect.attention import attention_rows
from engine.model.decoder import Decoder

NEAR_ZERO = 0.05  # a layer whose mean token-0 share is below this is reported as "near zero"


def sink_rows(model: Decoder, ids: list[int], min_row: int, k: int) -> tuple[torch.Tensor, ...]:
    """Per-row shares on token 0 and on tokens 0..k-1, float32 [layers, heads, rows min_row..len-1] each, and
    every key's sink score [layers, len]: its share averaged over heads and over the rows ≥ min_row that see
    it; keys seen by fewer than half of those rows score 0 (a late key's few rows include its own, trivially)."""
    if len(ids) <= min_row:
        raise PromptError(f"a prompt of {len(ids)} tokens has no rows at or past --min-row {min_row}")
    cfg = model.config
    first = torch.empty(cfg.num_layers, cfg.num_heads, len(ids) - min_row)
    first_k = torch.empty_like(first)
    keys = torch.zeros(cfg.num_layers, len(ids))

    def keep(layer: int, start: int, p: torch.Tensor) -> None:
        first[layer, :, start : start + p.shape[1]] = p[..., 0]
        first_k[layer, :, start : start + p.shape[1]] = p[..., :k].sum(-1)
        keys[layer] += p.mean(0).sum(0)

    tokens = torch.tensor(ids, device=model.embed.device)
    attention_rows(model, tokens, range(cfg.num_layers), range(cfg.num_heads), range(min_row, len(ids)), keep)
    seen_by = len(ids) - torch.arange(len(ids)).clamp(min=min_row)  # rows >= min_row at or after each key
    return first, first_k, torch.where(2 * seen_by >= first.shape[-1], keys / seen_by, 0.0)


def transformers_rows(model: Any, ids: list[int], min_row: int, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The same shares from `transformers`' eager `output_attentions` (the reference implementation)."""
    with torch.no_grad():
        att = torch.stack(model(torch.tensor([ids]), output_attentions=True).attentions)[:, 0, :, min_row:]
    return att[..., 0], att[..., :k].sum(-1)


def summary(share: torch.Tensor, eps: float) -> dict[str, Any]:
    """Statistics over layers of the per-layer mean (over heads) of a [layers, heads] share matrix."""
    per_layer = share.mean(1).tolist()
    top = max(range(len(per_layer)), key=per_layer.__getitem__)
    return {
        "mean": statistics.mean(per_layer),
        "median": statistics.median(per_layer),
        "max": per_layer[top],
        "max_layer": top,
        "near_zero_layers": [i for i, v in enumerate(per_layer) if v < NEAR_ZERO],
        "heads_above_eps": (share > eps).float().mean().item(),
        "heads_above_0.5": (share > 0.5).float().mean().item(),
        "per_layer": per_layer,
        "layer_head": share.tolist(),
    }


def lengths(first: torch.Tensor, min_row: int, n: int, eps: float) -> list[dict[str, float]]:
    """Token-0 statistics of every power-of-two prefix length (and the full prompt)."""
    sizes = [2**i for i in range(5, n.bit_length()) if 2**i > min_row] + [n]
    return [
        {
            "length": size,
            "mean": first[..., : size - min_row].mean().item(),
            "heads_above_eps": (first[..., : size - min_row].mean(-1) > eps).float().mean().item(),
        }
        for size in sizes
    ]
