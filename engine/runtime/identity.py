"""What every result records about the model and machine it came from."""

from __future__ import annotations

import platform
from typing import Any

import torch
import transformers

from engine.devices import cpu_capability, device_description, dtype_name
from engine.loading.sources import ModelSource


def identity(
    source: ModelSource, dtype: torch.dtype, device: torch.device, block_size: int, cache_tokens: int
) -> dict[str, Any]:
    """Model, weights digest, architecture, context length and RoPE scaling, dtype, device, the host CPU's
    capability (torch's vector level and its bfloat16 matrix instructions), cache geometry and library
    versions."""
    scaling = source.config.rope_scaling
    return {
        "model": source.model_id,
        "source": source.kind,
        "synthetic_weights": source.synthetic,
        "weights_digest": source.digest,
        "arch": source.config.arch,
        "context_length": source.config.max_position_embeddings,
        "rope_scaling": scaling.to_hf() if scaling else None,
        "dtype": dtype_name(dtype),
        "device": str(device),
        "device_name": device_description(device),
        **cpu_capability(),
        "block_size": block_size,
        "cache_tokens": cache_tokens,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
    }
