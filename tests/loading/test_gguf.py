"""The bundled SmolLM2 GGUF: dequantized by us, checked against transformers' own GGUF loader; GGUF features we
lack (metadata keys, tensors) refused by name, and a truncated file one clear line; a converted folder that no
longer holds what was converted into it is converted again, never served. GGUF rope scaling:
test_gguf_rope_scaling.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import engine
from engine.errors import CacheFolderError, UnsupportedModelError, WeightsError
from engine.loading.sources import alias_path

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


def test_logits_match_transformers_gguf(smollm2_on_device, precision) -> None:
    """float32: within 1e-3 (both dequantize Q4_1); half precision: 3x transformers' own error in that dtype,
    measured here on the same model and prompt (tests/precision.py)."""
    from transformers import AutoModelForCausalLM

    path: Path = alias_path("smollm2-135m")
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


@pytest.mark.parametrize(("meta", "names", "message"), GGUF_CASES)
def test_gguf_features_we_lack_are_refused(tmp_path, private_cache, meta, names, message) -> None:
    with pytest.raises(UnsupportedModelError, match=message):
        engine.load(str(write_gguf(tmp_path / "m.gguf", meta, names)))
    assert not any((private_cache / "gguf").glob("*"))  # refused before anything is converted or kept


def test_gguf_truncated_to_1000_bytes(tmp_path, private_cache) -> None:
    bad = tmp_path / "cut.gguf"
    bad.write_bytes(alias_path("smollm2-135m").read_bytes()[:1000])
    with pytest.raises(WeightsError, match=r"cut\.gguf: truncated or corrupt \(1,000 bytes;") as caught:
        engine.load(str(bad))
    assert "out of bounds" not in str(caught.value)


TINY_TENSORS = {  # a one-layer Llama: hidden 8, 2 heads, MLP 16, vocabulary 32
    "token_embd.weight": (32, 8),
    "output_norm.weight": (8,),
    "blk.0.attn_norm.weight": (8,),
    "blk.0.ffn_norm.weight": (8,),
    "blk.0.attn_q.weight": (8, 8),
    "blk.0.attn_k.weight": (8, 8),
    "blk.0.attn_v.weight": (8, 8),
    "blk.0.attn_output.weight": (8, 8),
    "blk.0.ffn_gate.weight": (16, 8),
    "blk.0.ffn_up.weight": (16, 8),
    "blk.0.ffn_down.weight": (8, 16),
}


def write_tiny_model_gguf(path: Path) -> Path:
    """A complete, loadable float32 GGUF of seeded random weights (its tokenizer does not load: ids only)."""
    import gguf

    rng = np.random.default_rng(0)
    writer = gguf.GGUFWriter(str(path), "llama")
    for add, value in [
        (writer.add_block_count, 1),
        (writer.add_embedding_length, 8),
        (writer.add_head_count, 2),
        (writer.add_head_count_kv, 2),
        (writer.add_feed_forward_length, 16),
        (writer.add_context_length, 64),
        (writer.add_layer_norm_rms_eps, 1e-5),
        (writer.add_token_list, [f"t{i}" for i in range(32)]),
    ]:
        add(value)
    for name, shape in TINY_TENSORS.items():
        writer.add_tensor(name, rng.standard_normal(shape).astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _converted(cache: Path) -> Path:
    (folder,) = (cache / "gguf").iterdir()
    return folder


def test_a_damaged_conversion_is_converted_again(tmp_path, monkeypatch, capsys) -> None:
    """Zeroed bytes, a truncated file, a deleted file, a folder from before digests were recorded: each is
    found by the digests recorded at conversion and converted again, with a notice; never served."""
    import os

    cache = tmp_path / "cache"
    monkeypatch.setenv("KVTESTBED_CACHE", str(cache))
    model = str(write_tiny_model_gguf(tmp_path / "tiny.gguf"))
    expected = engine.load(model, device="cpu", cache_tokens=64).logits([1, 2, 3])
    weights = _converted(cache) / "model.safetensors"
    size = weights.stat().st_size

    def zero_the_tail(f: Path) -> None:
        with open(f, "r+b") as fh:
            fh.seek(size - 512)
            fh.write(bytes(256))

    damages = [
        (zero_the_tail, "holds a model.safetensors that differs from the one converted"),
        (lambda f: os.truncate(f, size // 2), "holds a model.safetensors that differs"),
        (lambda f: (f.parent / "config.json").unlink(), "lacks config.json"),
        (lambda f: (f.parent / "source.json").write_text('{"gguf": "x"}'), "records no digests of its files"),
    ]
    for damage, notice in damages:
        capsys.readouterr()
        damage(weights)
        again = engine.load(model, device="cpu", cache_tokens=64)
        assert f"{_converted(cache)} {notice}" in capsys.readouterr().err
        assert torch.equal(again.logits([1, 2, 3]), expected)
        assert weights.stat().st_size == size
    engine.load(model, device="cpu", cache_tokens=64)  # whole again: read, not converted
    assert capsys.readouterr().err == ""


def test_a_cache_folder_that_cannot_be_written_is_one_line(tmp_path, monkeypatch) -> None:
    model = str(write_tiny_model_gguf(tmp_path / "tiny.gguf"))
    monkeypatch.setenv("KVTESTBED_CACHE", str(tmp_path / "a-file"))
    (tmp_path / "a-file").write_text("not a folder")
    with pytest.raises(CacheFolderError, match=r"a-file/gguf cannot be written .*: set KVTESTBED_CACHE to a"):
        engine.load(model, device="cpu", cache_tokens=64)
