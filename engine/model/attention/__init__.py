"""Attention backends: how a paged step's attention reads the K/V pool. One module per backend, each with a
`plan(spans, kv)` made once per step and called once per layer (`engine.kv.step.PagedAttention`):

- `torch_sdpa`: PyTorch's own kernels, on every device (CPU and MPS always; CUDA when no library is);
- `flashinfer`: FlashInfer's paged prefill kernel (CUDA, `pip install flashinfer-python`): one call per
  layer for the whole batch, read through the block tables;
- `flash_attn`: flash-attn's varlen kernel over the block tables (CUDA, `pip install flash-attn`, blocks of
  a multiple of 256 tokens).

`select` picks by device and what is installed (`auto`), or by name; the choice, and why, is the
`description` every result's environment records (`Engine.info["attention"]`).
"""

from __future__ import annotations

import importlib.util

import torch

from engine.errors import DeviceError
from engine.kv.step import AttentionBackend
from engine.model.attention.torch_sdpa import TorchBackend

NAMES = ("auto", "torch", "flashinfer", "flash-attn")
MODULES = {"flashinfer": "flashinfer", "flash-attn": "flash_attn"}


def installed(name: str) -> bool:
    return importlib.util.find_spec(MODULES[name]) is not None


def unusable(name: str, device: torch.device, dtype: torch.dtype, block_size: int) -> str | None:
    """Why a CUDA library backend cannot run here (None: it can)."""
    if device.type != "cuda":
        return f"{name} runs on CUDA only"
    if not installed(name):
        return f"{name} is not installed"
    if dtype not in (torch.float16, torch.bfloat16):
        return f"{name} needs float16 or bfloat16"
    if name == "flash-attn" and block_size % 256:
        return f"flash-attn's paged kernel needs blocks of a multiple of 256 tokens (block_size {block_size})"
    return None


def select(name: str, device: torch.device, dtype: torch.dtype, block_size: int) -> AttentionBackend:
    """The backend called `name` (see NAMES), or for "auto" the best one this device and installation
    offer: a CUDA library first, else torch (whose description then says what was missing)."""
    if name not in NAMES:
        raise DeviceError(f"unknown attention backend {name!r}; use one of {', '.join(NAMES)}")
    if name == "torch":
        return TorchBackend(device)
    if name != "auto":
        reason = unusable(name, device, dtype, block_size)
        if reason is not None:
            raise DeviceError(f"attention backend {name} cannot run: {reason}")
        return _library(name, device)
    reasons = []
    for lib in ("flashinfer", "flash-attn") if device.type == "cuda" else ():
        reason = unusable(lib, device, dtype, block_size)
        if reason is None:
            return _library(lib, device)
        reasons.append(reason)
    backend = TorchBackend(device)
    if reasons:
        backend.description += f" (fallback: {'; '.join(reasons)})"
    return backend


def _library(name: str, device: torch.device) -> AttentionBackend:
    if name == "flashinfer":
        from engine.model.attention.flashinfer import FlashInferBackend

        return FlashInferBackend(device)
    from engine.model.attention.flash_attn import FlashAttnBackend

    return FlashAttnBackend(device)
