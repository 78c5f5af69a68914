"""A decode step's floor on a CPU: one row through every matrix the step multiplies by, nothing else (the step
reads every weight once). Used by `test_decode_weight_stream` and `scripts/decode_profile.py`."""

from __future__ import annotations

from collections.abc import Callable

import torch

from engine.model.decoder import Decoder
from engine.model.layers import linear


def weight_rows(model: Decoder) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(weight, one input row) for every matrix a decode step multiplies by, in the order it does."""
    mats: list[torch.Tensor] = []
    for layer in model.layers:
        attn, mlp = layer.attn, layer.mlp
        gate_up = mlp.gate_up_weight
        mats += [attn.qkv_weight, attn.o_weight, gate_up[: mlp.inter], gate_up[mlp.inter :], mlp.down_weight]
    mats.append(model.lm_head)
    return [(w, torch.randn(1, w.shape[1], dtype=w.dtype, device=w.device)) for w in mats]


def weight_stream(rows: list[tuple[torch.Tensor, torch.Tensor]]) -> Callable[[], None]:
    @torch.inference_mode()
    def stream() -> None:
        for w, x in rows:
            linear(x, w)

    return stream
