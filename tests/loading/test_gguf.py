"""The bundled SmolLM2 GGUF: dequantized by us, checked against transformers' own GGUF loader; GGUF rope scaling
(YaRN metadata, Llama 3's rope_freqs.weight) against transformers with the same scaling; GGUF features we lack
(metadata keys, tensors) refused by name, and a truncated file one clear line."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import engine
from engine.errors import UnsupportedModelError, WeightsError
from engine.loading.gguf import _LAYER_NAMES, _TOP_NAMES, ROPE_FREQS
from engine.loading.sources import _alias_path
from engine.model.config import ModelConfig
from engine.model.rope_scaling import Llama3, scaling_from_gguf
from tests.conftest import SCALINGS, build_hf_model, random_ids

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


def test_logits_match_transformers_gguf(smollm2_on_device, precision) -> None:
    """float32: within 1e-3 (both dequantize Q4_1); half precision: 3x transformers' own error in that dtype,
    measured here on the same model and prompt (tests/precision.py)."""
    from transformers import AutoModelForCausalLM

    path: Path = _alias_path("smollm2-135m")
    ref = AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    ids = smollm2_on_device.render([{"role": "system", "content": "You are terse."}] + QUESTION)
    with torch.no_grad():
        expected = ref(torch.tensor([ids])).logits[0]
    tol = 1e-3 if precision.exact else precision.logits_tol("smollm2-135m", model=ref, ids=ids)
    assert (
        precision.observe(
            "smollm2-135m", "logits", (smollm2_on_device.logits(ids).cpu() - expected).abs().max().item()
        )
        <= tol
    )


def test_greedy_answer_names_paris(smollm2_on_device) -> None:
    gen = smollm2_on_device.generate(QUESTION, max_new_tokens=24)
    assert "Paris" in gen.text
    assert gen.finish_reason == "stop"  # stopped at <|im_end|>, not at the length limit


def test_config_read_from_gguf_metadata(smollm2) -> None:
    c = smollm2.config
    assert (c.arch, c.hidden_size, c.num_layers, c.num_heads, c.num_kv_heads, c.head_dim) == (
        "llama",
        576,
        30,
        9,
        3,
        64,
    )
    assert c.tie_word_embeddings and c.rope_theta == 100000.0 and c.vocab_size == 49152
    assert smollm2.info["source"] == "gguf" and len(smollm2.info["weights_digest"]) == 64


def test_conversion_is_cached(smollm2, monkeypatch) -> None:
    """A second load reads the converted folder and never parses the GGUF again."""
    import gguf

    def refuse(*args, **kwargs):
        raise AssertionError("the GGUF was parsed again")

    monkeypatch.setattr(gguf, "GGUFReader", refuse)
    again = engine.load("smollm2-135m", device="cpu", cache_tokens=256)
    assert again.source.digest == smollm2.source.digest


def gguf_file(path: Path, meta: dict[str, Any], tensors: dict[str, np.ndarray]) -> Path:
    """A llama GGUF with these key/values (int: uint32, float: float32, str, list: array) and tensors."""
    import gguf

    writer = gguf.GGUFWriter(str(path), "llama")
    for key, value in meta.items():
        add = {str: writer.add_string, float: writer.add_float32, list: writer.add_array}
        add.get(type(value), writer.add_uint32)(key, value)
    for name, tensor in tensors.items():
        writer.add_tensor(name, tensor)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def write_gguf(path: Path, extra: dict[str, Any], tensor_names: tuple[str, ...] = ()) -> Path:
    """A GGUF holding metadata (and zero tensors): enough to reach the config and tensor-name checks."""
    shape = {"block_count": 1, "embedding_length": 8, "attention.head_count": 2, "feed_forward_length": 16}
    meta = {f"llama.{k}": v for k, v in (shape | {"context_length": 64} | extra).items()}
    zeros = {name: np.zeros((3, 8), dtype=np.float32) for name in tensor_names}
    return gguf_file(path, meta | {"tokenizer.ggml.tokens": ["a", "b", "c"]}, zeros)


GGUF_CASES = [
    pytest.param(
        {"rope.scaling.type": "linear", "rope.scaling.factor": 2.0},
        (),
        r"GGUF metadata llama\.rope\.scaling\.type = 'linear' is not implemented \(supported: none, yarn",
        id="linear rope scaling",
    ),
    pytest.param(
        {"rope.scaling.type": "longrope"}, (), r"rope\.scaling\.type = 'longrope' is not", id="longrope"
    ),
    pytest.param(
        {"rope.scaling.factor": 2.0},
        (),
        r"GGUF metadata llama\.rope\.scaling\.factor = 2\.0 is not implemented",
        id="a scaling factor without a scaling type",
    ),
    pytest.param(
        {"rope.scaling.type": "yarn", "rope.scaling.factor": 4.0, "rope.scaling.yarn_attn_factor": 0.5},
        (),
        r"GGUF metadata llama\.rope\.scaling\.yarn_attn_factor = 0\.5 is not implemented",
        id="llama.cpp's own yarn attention factor",
    ),
    pytest.param(
        {"attention.sliding_window": 16}, (), r"llama\.attention\.sliding_window = 16", id="sliding window"
    ),
    pytest.param(
        {"rope.dimension_count": 2},
        (),
        r"llama\.rope\.dimension_count = 2 differs from the head",
        id="partial rotary",
    ),
    pytest.param({"expert_count": 8}, (), r"llama\.expert_count = 8 is not implemented", id="experts"),
    pytest.param(
        {},
        ("rope_freqs.weight",),
        r"GGUF tensor rope_freqs\.weight has 24 values, not head_dim / 2 = 2",
        id="rope frequency factors of the wrong size",
    ),
    pytest.param(
        {},
        ("blk.0.attn_gate.weight",),
        r"GGUF tensor blk\.0\.attn_gate\.weight is not impl",
        id="unknown tensor",
    ),
]


@pytest.fixture
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A kvtestbed cache of this test's own: a GGUF the test writes is converted (or refused) there, never read
    from or left in the user cache that every checkout on the machine shares."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("KVTESTBED_CACHE", str(cache))
    return cache


@pytest.mark.parametrize(("meta", "names", "message"), GGUF_CASES)
def test_gguf_features_we_lack_are_refused(tmp_path, private_cache, meta, names, message) -> None:
    with pytest.raises(UnsupportedModelError, match=message):
        engine.load(str(write_gguf(tmp_path / "m.gguf", meta, names)))
    assert not any((private_cache / "gguf").glob("*"))  # refused before anything is converted or kept


def test_gguf_truncated_to_1000_bytes(tmp_path, private_cache) -> None:
    bad = tmp_path / "cut.gguf"
    bad.write_bytes(_alias_path("smollm2-135m").read_bytes()[:1000])
    with pytest.raises(WeightsError, match=r"cut\.gguf: truncated or corrupt \(1,000 bytes;") as caught:
        engine.load(str(bad))
    assert "out of bounds" not in str(caught.value)


def llama_cpp_divisors(theta: float, head_dim: int, factor: float) -> list[float]:
    """rope_freqs.weight as llama.cpp's converter computes it for Llama 3 (its defaults: low_freq_factor 1,
    high_freq_factor 4, original context 8192; float64, stored as float32)."""
    out = []
    for i in range(0, head_dim, 2):
        wavelen = 2 * math.pi * theta ** (i / head_dim)
        if wavelen < 8192 / 4:
            out.append(1.0)
        elif wavelen > 8192 / 1:
            out.append(factor)
        else:
            smooth = (8192 / wavelen - 1) / (4 - 1)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32).tolist()


@pytest.mark.parametrize("factor", [8.0, 32.0])  # Llama 3.1 / 3.3 and Llama 3.2
def test_llama3_read_back_from_llama_cpp_divisors(factor: float) -> None:
    divisors = llama_cpp_divisors(5e5, 128, factor)
    assert scaling_from_gguf({}, "llama", 131072, 5e5, 128, divisors) == Llama3(factor, 1.0, 4.0, 8192)
    divisors[40] *= 1.01  # any other frequency factors: refused, never approximated
    with pytest.raises(UnsupportedModelError, match="rope_freqs.weight is not Llama 3 rope scaling"):
        scaling_from_gguf({}, "llama", 131072, 5e5, 128, divisors)


def llama_as_gguf(path: Path, model: Any, rope: dict[str, Any], rope_freqs: list[float] | None) -> Path:
    """A transformers Llama written as llama.cpp's converter writes it (float32, q/k rows permuted for its
    RoPE), with RoPE metadata `rope` (after "llama.") and, given, a rope_freqs.weight tensor."""
    c = model.config
    meta = {
        "block_count": c.num_hidden_layers,
        "embedding_length": c.hidden_size,
        "attention.head_count": c.num_attention_heads,
        "attention.head_count_kv": c.num_key_value_heads,
        "feed_forward_length": c.intermediate_size,
        "context_length": c.max_position_embeddings,
        "rope.freq_base": float(c.rope_parameters["rope_theta"]),
        "attention.layer_norm_rms_epsilon": float(c.rms_norm_eps),
        "vocab_size": c.vocab_size,
    }
    to_gguf = {hf: name for name, hf in _TOP_NAMES.items()}
    for name, hf in _LAYER_NAMES.items():
        to_gguf |= {f"model.layers.{i}.{hf}": f"blk.{i}.{name}" for i in range(c.num_hidden_layers)}
    tensors = {}
    for hf, tensor in model.state_dict().items():
        a = tensor.numpy()
        if hf.endswith(("q_proj.weight", "k_proj.weight")):
            heads = c.num_attention_heads if "q_proj" in hf else c.num_key_value_heads
            a = a.reshape(heads, 2, a.shape[0] // heads // 2, *a.shape[1:]).swapaxes(1, 2).reshape(a.shape)
        tensors[to_gguf[hf]] = np.ascontiguousarray(a)
    if rope_freqs is not None:
        tensors[ROPE_FREQS] = np.array(rope_freqs, dtype=np.float32)
    return gguf_file(path, {f"llama.{k}": v for k, v in (meta | rope).items()}, tensors)


GGUF_SCALINGS = [
    pytest.param(
        SCALINGS["yarn"],
        {
            "rope.scaling.type": "yarn",
            "rope.scaling.factor": 4.0,
            "rope.scaling.original_context_length": 64,
        },
        False,
        id="yarn metadata",
    ),
    pytest.param(
        {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}
        | {"original_max_position_embeddings": 8192},
        {},
        True,
        id="llama3 rope_freqs",
    ),
]


@pytest.mark.parametrize(("scaling", "rope", "freqs"), GGUF_SCALINGS)
def test_gguf_rope_scaling_matches_transformers(tmp_path, private_cache, scaling, rope, freqs) -> None:
    """A Llama GGUF with YaRN metadata, or with Llama 3's rope_freqs.weight, computes what transformers
    computes with that scaling in config.json, over a 200-token prompt (YaRN's original window: 64)."""
    ref = build_hf_model("llama", rope_scaling=dict(scaling), max_position_embeddings=16384 if freqs else 256)
    divisors = llama_cpp_divisors(10000.0, 16, 8.0) if freqs else None
    path = llama_as_gguf(tmp_path / "scaled.gguf", ref, rope, divisors)
    ours = engine.load(str(path), device="cpu", cache_tokens=512)
    expected_scaling = ModelConfig.from_hf(ref.config.to_dict()).rope_scaling
    assert expected_scaling is not None and ours.config.rope_scaling == expected_scaling
    ids = random_ids(200, 41)
    with torch.no_grad():
        expected = ref(torch.tensor([ids])).logits[0]
    assert (ours.logits(ids) - expected).abs().max().item() <= 1e-4
