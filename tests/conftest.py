"""Shared fixtures: tiny random-weight models built with `transformers` and saved as safetensors.

Everything here is offline: no Hugging Face hub access, no downloads.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch.set_num_threads(min(2, os.cpu_count() or 1))

TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=8192)  # fmt: skip


def build_hf_model(kind: str, vocab_size: int = 512, seed: int = 0, **overrides):
    """A transformers model of the requested kind with seeded random weights (float32, eager attention)."""
    from transformers import (
        LlamaConfig,
        LlamaForCausalLM,
        Qwen2Config,
        Qwen2ForCausalLM,
        Qwen3Config,
        Qwen3ForCausalLM,
    )

    torch.manual_seed(seed)
    common = TINY | {"vocab_size": vocab_size, "rope_theta": 10000.0, "initializer_range": 0.1} | overrides
    if kind == "qwen2":
        cfg = Qwen2Config(**common, tie_word_embeddings=False)
        model = Qwen2ForCausalLM(cfg)
    elif kind == "qwen3":  # head_dim 32 != hidden 64 / 4 heads: o_proj input is heads x head_dim
        cfg = Qwen3Config(**common | {"head_dim": 32}, tie_word_embeddings=True)
        model = Qwen3ForCausalLM(cfg)
    elif kind in ("llama", "llama-tied"):
        cfg = LlamaConfig(**common, tie_word_embeddings=kind == "llama-tied")
        model = LlamaForCausalLM(cfg)
    else:
        raise ValueError(kind)
    model.config._attn_implementation = "eager"
    with torch.no_grad():  # random biases, so that a wrongly mapped bias cannot go unnoticed
        for name, p in model.named_parameters():
            if name.endswith("bias") or "norm" in name:
                p.add_(torch.randn_like(p) * 0.1)
    return model.eval()


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """tiny_dir(kind, tokenizer=False) -> folder with config.json + model.safetensors (+ Qwen tokenizer)."""
    made: dict[tuple, Path] = {}

    def make(kind: str, tokenizer: bool = False) -> Path:
        key = (kind, tokenizer)
        if key not in made:
            folder = tmp_path_factory.mktemp(f"{kind}{'-tok' if tokenizer else ''}")
            model = build_hf_model(kind, vocab_size=151936 if tokenizer else 512)
            model.save_pretrained(str(folder), safe_serialization=True)
            if tokenizer:
                from engine.tokenizer import load_tokenizer, qwen_tokenizer_dir

                load_tokenizer(qwen_tokenizer_dir()).save_pretrained(str(folder))
            made[key] = folder
        return made[key]

    return make


@pytest.fixture
def copy_of(tiny_dir: Callable[..., Path], tmp_path: Path) -> Callable[..., Path]:
    """copy_of(kind) -> a private copy of a tiny model folder, free to be damaged by the test."""

    def make(kind: str = "qwen2") -> Path:
        dest = tmp_path / kind
        shutil.copytree(tiny_dir(kind), dest)
        return dest

    return make


def edit_config(folder: Path, **changes: object) -> None:
    """Merge `changes` into the folder's config.json."""
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(cfg | changes))


@pytest.fixture(scope="session")
def smollm2():
    """The bundled real model (SmolLM2-135M-Instruct, GGUF Q4_1, dequantized to float32)."""
    import engine

    return engine.load("smollm2-135m", device="cpu", cache_tokens=8192)


@pytest.fixture
def eng(tiny_dir: Callable[..., Path]):
    """A tiny Qwen2 engine with its own 1,024-token prefix cache in blocks of 16."""
    import engine

    return engine.load(str(tiny_dir("qwen2")), device="cpu", block_size=16, cache_tokens=1024)


def random_ids(n: int, seed: int) -> list[int]:
    """Seeded token ids in [3, 512), the tiny models' vocabulary without its first ids."""
    return torch.randint(3, 512, (n,), generator=torch.Generator().manual_seed(seed)).tolist()
