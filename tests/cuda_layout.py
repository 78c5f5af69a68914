"""CUDA's arrangement of the attention kernels, run on a CPU.

On CUDA the torch backend arranges its calls for the fused kernels (flash, memory-efficient): one masked call
per layer (no log-sum-exp merge) and query heads folded into rows where a mask is given (`split` and
`native_gqa` off), and those kernels return `[B, H, T, D]` as a transposed view of a `[B, T, H, D]` buffer,
where the CPU's return a contiguous tensor. `cuda_arrangement` sets up both on a CPU (the backend `select`
builds, and `scaled_dot_product_attention`'s output strides), so that what the CPU's layout would hide (a
`.view` of a kernel's output) fails here as it would on the first GPU.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention.bias import CausalBias

from engine.model import attention
from engine.model.attention.torch_sdpa import TorchBackend


def fused_layout(sdpa: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """`sdpa` whose output `[..., H, T, D]` is a transposed view of a `[..., T, H, D]` buffer, as CUDA's flash
    and memory-efficient kernels return it."""

    @functools.wraps(sdpa)
    def wrapped(
        q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: object = None, **kwargs: object
    ) -> torch.Tensor:
        if isinstance(attn_mask, CausalBias):  # its own dispatch, which looks for SDPA by identity
            out = CausalBias._dispatch(q, k, v, attn_mask, **kwargs)
        else:
            out = sdpa(q, k, v, attn_mask=attn_mask, **kwargs)
        return out.transpose(-3, -2).contiguous().transpose(-3, -2)

    return wrapped


def arrange_as_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    """From now on (the test's lifetime): engines load the torch backend arranged as on CUDA, and SDPA
    returns CUDA's fused-kernel strides."""
    monkeypatch.setattr(attention, "TorchBackend", functools.partial(TorchBackend, arrangement="cuda"))
    monkeypatch.setattr(F, "scaled_dot_product_attention", fused_layout(F.scaled_dot_product_attention))
