"""Issue 12's bad models, one table row each: a config field that changes math we lack, a tensor the model
would not use or lacks, a non-finite weight; each refused naming the cause (GGUF ones: tests/loading/test_gguf.py).

Every row damages a private copy of a tiny model: its config.json or its tensors.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file, save_file

import engine
from engine.errors import UnsupportedModelError, WeightsError
from tests.conftest import edit_config

Edit = Callable[[Path], None]


def config(**changes: Any) -> Edit:
    return lambda folder: edit_config(folder, **changes)


def tensors(change: Callable[[dict[str, torch.Tensor]], None]) -> Edit:
    def edit(folder: Path) -> None:
        weights = load_file(str(folder / "model.safetensors"))
        change(weights)
        save_file(weights, str(folder / "model.safetensors"))

    return edit


def both(*edits: Edit) -> Edit:
    return lambda folder: [edit(folder) for edit in edits] and None


def add(name: str, like: str, value: float = 0.0) -> Callable[[dict[str, torch.Tensor]], None]:
    return lambda w: w.__setitem__(name, torch.full_like(w[like], value))


def poke(name: str, value: float) -> Callable[[dict[str, torch.Tensor]], None]:
    return lambda w: w[name].view(-1).__setitem__(3, value)


L0 = "model.layers.0."
ROPE = {"rope_type": "default", "rope_theta": 10000.0}
NO_LAYER_TYPES = {"layer_types": None}  # saved configs list them; without, transformers derives them
Unsupported, Weights = UnsupportedModelError, WeightsError


def case(name: str, kind: str, edit: Edit, error: type, message: str, dtype: str | None = None) -> Any:
    return pytest.param(kind, edit, dtype, error, message, id=name)


MODEL_CASES = [
    case(
        "hidden_act gelu", "qwen2", config(hidden_act="gelu"), Unsupported, r"hidden_act 'gelu' is not impl"
    ),
    case(
        "dynamic NTK",
        "llama",
        config(rope_scaling={"type": "dynamic", "factor": 2.0}),
        Unsupported,
        r"rope_scaling: rope type 'dynamic' is not implemented \(dynamic NTK changes the frequencies with the "
        r"sequence length.*breaks prefix reuse\)",
    ),
    case(
        "linear rope_parameters",
        "qwen2",
        config(rope_parameters=ROPE | {"rope_type": "linear", "factor": 2.0}),
        Unsupported,
        r"rope_parameters: rope type 'linear' is not implemented \(position interpolation",
    ),
    case(
        "longrope",
        "llama",
        config(rope_scaling={"rope_type": "longrope", "short_factor": [1.0], "long_factor": [2.0]}),
        Unsupported,
        r"rope type 'longrope' is not implemented \(LongRoPE switches its frequency factors when the sequence",
    ),
    case(
        "an unknown rope type",
        "qwen3",
        config(rope_scaling={"rope_type": "proportional", "factor": 2.0}),
        Unsupported,
        r"rope type 'proportional' is not implemented \(the rope types implemented are default, yarn, llama3\)",
    ),
    case(
        "llama3 without its frequency factors",
        "llama",
        config(rope_parameters=ROPE | {"rope_type": "llama3", "factor": 8.0}),
        Unsupported,
        r"llama3 rope scaling lacks required field 'low_freq_factor'",
    ),
    case(
        "yarn without a factor",
        "qwen2",
        config(rope_scaling={"rope_type": "yarn", "original_max_position_embeddings": 64}),
        Unsupported,
        r"yarn rope scaling lacks required field 'factor'",
    ),
    case(
        "yarn factor below 1",
        "qwen3",
        config(rope_scaling={"rope_type": "yarn", "factor": 0.5}),
        Unsupported,
        r"rope scaling factor must be at least 1, got 0\.5",
    ),
    case(
        "rope_scaling that drops rope_parameters' theta",
        "qwen2",
        config(rope_parameters=ROPE | {"rope_theta": 1e6}, rope_scaling={"rope_type": "yarn", "factor": 4.0}),
        Unsupported,
        r"rope_parameters' rope_theta 1000000\.0 differs from the rope_theta 10000\.0 that transformers "
        r"applies with rope_scaling .*: add rope_theta to rope_scaling",
    ),
    case(
        "rope_scaling and rope_parameters of different types",
        "llama",
        config(
            rope_parameters=ROPE | {"rope_type": "yarn", "factor": 4.0},
            rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1, "high_freq_factor": 4},
        ),
        Unsupported,
        r"rope_scaling \(rope type 'llama3'\) and rope_parameters \(rope type 'yarn'\) disagree",
    ),
    case(
        "different rope scaling per layer type",
        "qwen2",
        config(rope_parameters={"full_attention": ROPE, "sliding_attention": ROPE | {"rope_type": "yarn"}}),
        Unsupported,
        r"rope_parameters: different RoPE per layer type is not implemented",
    ),
    case(
        "partial_rotary_factor",
        "llama",
        config(partial_rotary_factor=0.5),
        Unsupported,
        r"partial_rotary_factor 0\.5 is not implemented",
    ),
    case(
        "use_sliding_window",
        "qwen2",
        config(use_sliding_window=True, sliding_window=64, max_window_layers=1, **NO_LAYER_TYPES),
        Unsupported,
        r"sliding-window attention \(use_sliding_window: true, window 64 < context 8192, from layer 1",
    ),
    case(
        "sliding layer_types",
        "qwen3",
        config(
            layer_types=["sliding_attention", "full_attention"], use_sliding_window=True, sliding_window=128
        ),
        Unsupported,
        r"window 128 < context 8192, from layer 0\)",
    ),
    case(
        "quantization_config",
        "llama",
        config(quantization_config={"quant_method": "gptq"}),
        Unsupported,
        r"quantization_config \(gptq\) is not implemented",
    ),
    case(
        "zero heads",
        "llama",
        config(num_attention_heads=0),
        Unsupported,
        r"num_heads must be at least 1, got 0",
    ),
    case(
        "size of the wrong type", "llama", config(hidden_size="big"), Unsupported, r"field of the wrong type"
    ),
    case(
        "extra tensor",
        "qwen2",
        tensors(add(L0 + "mlp.extra_proj.weight", L0 + "mlp.up_proj.weight")),
        Weights,
        r"holds tensor model\.layers\.0\.mlp\.extra_proj\.weight that this model does not use",
    ),
    case(
        "extra layer",
        "llama",
        tensors(add("model.layers.2.input_layernorm.weight", "model.norm.weight")),
        Weights,
        r"model\.layers\.2\.input_layernorm\.weight that .* num_hidden_layers is 2",
    ),
    case(
        "attention bias the config lacks",
        "llama",
        tensors(add(L0 + "self_attn.q_proj.bias", "model.norm.weight")),
        Weights,
        r"self_attn\.q_proj\.bias that this model does not use \(config\.json: attention_bias is false\)",
    ),
    case(
        "attention bias the tensors lack",
        "llama",
        config(attention_bias=True),
        Weights,
        r"lacks tensor model\.layers\.0\.self_attn\.q_proj\.bias \(and 7 more\) \(config\.json: attention_bias is true\)",
    ),
    case(
        "mlp bias the tensors lack",
        "llama",
        config(mlp_bias=True),
        Weights,
        r"lacks tensor model\.layers\.0\.mlp\.gate_proj\.bias \(and 5 more\) \(config\.json: mlp_bias is true\)",
    ),
    case(
        "untied config, tied tensors",
        "llama-tied",
        config(tie_word_embeddings=False),
        Weights,
        r"lacks tensor lm_head\.weight \(config\.json: tie_word_embeddings is false\)",
    ),
    case(
        "tied config, a different head",
        "llama-tied",
        tensors(add("lm_head.weight", "model.embed_tokens.weight")),
        Weights,
        r"lm_head\.weight that differs from model\.embed_tokens\.weight",
    ),
    case(
        "NaN weight",
        "qwen2",
        tensors(poke(L0 + "mlp.up_proj.weight", math.nan)),
        Weights,
        r"tensor model\.layers\.0\.mlp\.up_proj\.weight holds 1 NaN value;",
    ),
    case(
        "inf weight",
        "qwen2",
        tensors(poke("model.norm.weight", math.inf)),
        Weights,
        r"tensor model\.norm\.weight holds 1 inf value;",
    ),
    case(
        "float16 overflow",
        "qwen2",
        tensors(poke(L0 + "self_attn.o_proj.weight", 1e6)),
        Weights,
        r"o_proj\.weight overflows float16 \(largest magnitude 1e\+06\)",
        dtype="float16",
    ),
]


@pytest.mark.parametrize(("kind", "edit", "dtype", "error", "message"), MODEL_CASES)
def test_bad_model_is_refused_by_name(copy_of, kind, edit, dtype, error, message) -> None:
    folder = copy_of(kind)
    edit(folder)
    with pytest.raises(error, match=message):
        engine.load(str(folder), device="cpu", dtype=dtype, cache_tokens=64)


ACCEPTED = [
    pytest.param(
        "qwen2",
        config(use_sliding_window=False, sliding_window=32, max_window_layers=1),
        id="Qwen2.5-style inactive sliding window",
    ),
    pytest.param(
        "qwen2",
        config(use_sliding_window=True, sliding_window=8192, max_window_layers=0, layer_types=None),
        id="a window as long as the context",
    ),
    pytest.param(
        "llama",
        both(
            config(rope_scaling={"type": "default"}, hidden_act="swish"),
            tensors(add("model.layers.1.self_attn.rotary_emb.inv_freq", "model.norm.weight")),
        ),
        id="default rope_scaling, swish, no-op rotary tables",
    ),
    pytest.param(
        "llama-tied",
        tensors(lambda w: w.__setitem__("lm_head.weight", w["model.embed_tokens.weight"].clone())),
        id="a tied head's exact duplicate",
    ),
]


@pytest.mark.parametrize(("kind", "edit"), ACCEPTED)
def test_harmless_fields_and_tensors_still_load(copy_of, tiny_dir, kind, edit) -> None:
    folder = copy_of(kind)
    edit(folder)
    ids = [5, 6, 7, 8]
    reference = engine.load(str(tiny_dir(kind)), device="cpu", cache_tokens=64).logits(ids)
    assert torch.equal(engine.load(str(folder), device="cpu", cache_tokens=64).logits(ids), reference)
