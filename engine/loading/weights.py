"""Weights in Hugging Face names: readers (safetensors files, seeded random tensors) and the checked loader.

Only safetensors (and GGUF, converted to safetensors by `engine.loading.sources`) are read; nothing is unpickled.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import torch
from safetensors import SafetensorError, safe_open

from engine.devices import dtype_name
from engine.errors import WeightsError
from engine.model.config import ModelConfig
from engine.model.decoder import Decoder


class TensorReader(Protocol):
    def names(self) -> set[str]: ...
    def get(self, name: str) -> torch.Tensor: ...


def expected_shapes(cfg: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor a checkpoint of this shape must hold, by Hugging Face name."""
    h, d, hid, inter = cfg.num_heads, cfg.head_dim, cfg.hidden_size, cfg.intermediate_size
    kv = cfg.num_kv_heads * d
    shapes: dict[str, tuple[int, ...]] = {
        "model.embed_tokens.weight": (cfg.vocab_size, hid),
        "model.norm.weight": (hid,),
    }
    if not cfg.tie_word_embeddings:
        shapes["lm_head.weight"] = (cfg.vocab_size, hid)
    for i in range(cfg.num_layers):
        p = f"model.layers.{i}."
        shapes |= {
            p + "input_layernorm.weight": (hid,),
            p + "post_attention_layernorm.weight": (hid,),
            p + "self_attn.q_proj.weight": (h * d, hid),
            p + "self_attn.k_proj.weight": (kv, hid),
            p + "self_attn.v_proj.weight": (kv, hid),
            p + "self_attn.o_proj.weight": (hid, h * d),
            p + "mlp.gate_proj.weight": (inter, hid),
            p + "mlp.up_proj.weight": (inter, hid),
            p + "mlp.down_proj.weight": (hid, inter),
        }
        if cfg.qkv_bias:
            shapes |= {p + "self_attn.q_proj.bias": (h * d,), p + "self_attn.k_proj.bias": (kv,)}
            shapes |= {p + "self_attn.v_proj.bias": (kv,)}
        if cfg.o_bias:
            shapes[p + "self_attn.o_proj.bias"] = (hid,)
        if cfg.mlp_bias:
            shapes |= {p + "mlp.gate_proj.bias": (inter,), p + "mlp.up_proj.bias": (inter,)}
            shapes[p + "mlp.down_proj.bias"] = (hid,)
        if cfg.qk_norm:
            shapes |= {p + "self_attn.q_norm.weight": (d,), p + "self_attn.k_norm.weight": (d,)}
    return shapes


def _destinations(model: Decoder) -> Iterator[tuple[str, torch.Tensor]]:
    """(HF name, the slice of our parameter it fills). Fused QKV and gate/up are filled piecewise."""
    cfg = model.config
    q, kv, inter = cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim, cfg.intermediate_size
    yield "model.embed_tokens.weight", model.embed
    yield "model.norm.weight", model.norm.weight
    if not cfg.tie_word_embeddings:
        yield "lm_head.weight", model.lm_head
    for i, layer in enumerate(model.layers):
        p, a, m = f"model.layers.{i}.", layer.attn, layer.mlp
        yield p + "input_layernorm.weight", layer.input_norm.weight
        yield p + "post_attention_layernorm.weight", layer.post_attn_norm.weight
        for suffix, fused in (("weight", a.qkv_weight), ("bias", a.qkv_bias)):
            if fused is not None:
                yield p + f"self_attn.q_proj.{suffix}", fused[:q]
                yield p + f"self_attn.k_proj.{suffix}", fused[q : q + kv]
                yield p + f"self_attn.v_proj.{suffix}", fused[q + kv :]
        yield p + "self_attn.o_proj.weight", a.o_weight
        if a.o_bias is not None:
            yield p + "self_attn.o_proj.bias", a.o_bias
        if a.q_norm is not None and a.k_norm is not None:
            yield p + "self_attn.q_norm.weight", a.q_norm.weight
            yield p + "self_attn.k_norm.weight", a.k_norm.weight
        for suffix, fused in (("weight", m.gate_up_weight), ("bias", m.gate_up_bias)):
            if fused is not None:
                yield p + f"mlp.gate_proj.{suffix}", fused[:inter]
                yield p + f"mlp.up_proj.{suffix}", fused[inter:]
        yield p + "mlp.down_proj.weight", m.down_weight
        if m.down_bias is not None:
            yield p + "mlp.down_proj.bias", m.down_bias


# Tensors a checkpoint may hold that the math does not read: RoPE tables, which are rebuilt from the config.
_DERIVED = re.compile(r"model\.(layers\.\d+\.self_attn\.)?rotary_emb\.inv_freq")


def load_weights(model: Decoder, reader: TensorReader) -> None:
    """Fill every parameter from the reader. Refused, naming the tensor: a missing one, a wrong shape, a
    tensor the model would not use, a non-finite value (NaN or inf, also after conversion to the dtype)."""
    cfg = model.config
    shapes, available = expected_shapes(cfg), reader.names()
    missing = [name for name in shapes if name not in available]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise WeightsError(f"checkpoint lacks tensor {missing[0]}{more}{_config_hint(cfg, missing[0])}")
    unused = sorted(n for n in available - set(shapes) if not _DERIVED.fullmatch(n))
    if cfg.tie_word_embeddings and "lm_head.weight" in unused:
        _check_tied_duplicate(reader)
        unused.remove("lm_head.weight")
    if unused:
        more = f" (and {len(unused) - 1} more)" if len(unused) > 1 else ""
        raise WeightsError(
            f"checkpoint holds tensor {unused[0]}{more} that this model does not use{_config_hint(cfg, unused[0])}"
            "; refused rather than ignored"
        )
    for name, dest in _destinations(model):
        tensor = reader.get(name)
        if tuple(tensor.shape) != shapes[name]:
            raise WeightsError(
                f"tensor {name} has shape {tuple(tensor.shape)} but the config implies {shapes[name]}"
            )
        dest.copy_(tensor)
        if not bool(torch.isfinite(dest).all()):
            _refuse_non_finite(name, tensor, dest.dtype)


def _config_hint(cfg: ModelConfig, name: str) -> str:
    """Which config.json field decides whether the named tensor belongs in the checkpoint."""
    layer = re.match(r"model\.layers\.(\d+)\.", name)
    if layer and int(layer.group(1)) >= cfg.num_layers:
        return f" (config.json: num_hidden_layers is {cfg.num_layers})"
    if name == "lm_head.weight":
        return f" (config.json: tie_word_embeddings is {str(cfg.tie_word_embeddings).lower()})"
    if ".self_attn." in name and name.endswith(".bias"):
        if cfg.arch == "qwen2":
            return " (Qwen2 has q/k/v biases and no o_proj bias, whatever config.json says)"
        return f" (config.json: attention_bias is {str(cfg.qkv_bias).lower()})"
    if ".mlp." in name and name.endswith(".bias"):
        if cfg.arch != "llama":
            return f" ({cfg.arch} MLPs have no biases)"
        return f" (config.json: mlp_bias is {str(cfg.mlp_bias).lower()})"
    return ""


def _check_tied_duplicate(reader: TensorReader) -> None:
    """With tied embeddings the head is the embedding; a stored copy must be exactly that copy."""
    if not torch.equal(reader.get("lm_head.weight"), reader.get("model.embed_tokens.weight")):
        raise WeightsError(
            "checkpoint holds lm_head.weight that differs from model.embed_tokens.weight, but config.json says "
            "tie_word_embeddings: true; refused rather than ignored"
        )


def _refuse_non_finite(name: str, tensor: torch.Tensor, dtype: torch.dtype) -> None:
    bad = ~torch.isfinite(tensor)
    if bool(bad.any()):
        kinds = [
            kind for kind, test in (("NaN", torch.isnan), ("inf", torch.isinf)) if bool(test(tensor).any())
        ]
        count = int(bad.sum())
        raise WeightsError(
            f"tensor {name} holds {count} {' and '.join(kinds)} value{'s' * (count > 1)}; refused"
        )
    largest = float(tensor.abs().max())
    raise WeightsError(
        f"tensor {name} overflows {dtype_name(dtype)} (largest magnitude {largest:.3g}); "
        "load it in float32 or bfloat16"
    )


class SafetensorsReader:
    """Tensors from one `*.safetensors` file or several shards listed by `model.safetensors.index.json`."""

    def __init__(self, directory: Path) -> None:
        index = directory / "model.safetensors.index.json"
        if index.exists():
            weight_map: dict[str, str] = json.loads(index.read_text())["weight_map"]
            files = sorted(set(weight_map.values()))
        else:
            files = sorted(p.name for p in directory.glob("*.safetensors"))
        if not files:
            raise WeightsError(f"no *.safetensors files in {directory}")
        self._handles = {}
        self._where: dict[str, str] = {}
        for file in files:
            path = directory / file
            try:
                handle = safe_open(str(path), framework="pt")
            except (SafetensorError, OSError, ValueError) as e:
                raise WeightsError(f"cannot read {path}: {str(e).splitlines()[0]}") from None
            self._handles[file] = handle
            self._where |= {name: file for name in handle.keys()}

    def names(self) -> set[str]:
        return set(self._where)

    def get(self, name: str) -> torch.Tensor:
        try:
            return self._handles[self._where[name]].get_tensor(name)
        except (SafetensorError, OSError, ValueError, RuntimeError) as e:
            raise WeightsError(f"cannot read tensor {name} from {self._where[name]}: {e}") from None


class SyntheticReader:
    """Seeded random weights with the exact shapes of a config: same cost to run, meaningless output.

    Each tensor's values depend only on (seed, name), so they are the same whatever the load order.
    """

    def __init__(self, cfg: ModelConfig, seed: int, device: torch.device, std: float = 0.02) -> None:
        self._shapes, self._seed, self._device, self._std = expected_shapes(cfg), seed, device, std

    def names(self) -> set[str]:
        return set(self._shapes)

    def get(self, name: str) -> torch.Tensor:
        shape = self._shapes[name]
        if name.endswith("norm.weight"):
            return torch.ones(shape, device=self._device)
        gen = torch.Generator(device=self._device).manual_seed(zlib.crc32(name.encode()) ^ self._seed)
        return torch.randn(shape, generator=gen, device=self._device) * self._std
