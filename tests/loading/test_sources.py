"""Model sources: folders (single and sharded), synthetic presets, configs, digests, missing tokenizers."""

from __future__ import annotations

import json

import pytest
import torch

import engine
from engine.errors import ContextOverflowError, TokenizerMissingError
from engine.loading.sources import resolve
from engine.model.config import ModelConfig
from engine.model.presets import SYNTHETIC_PRESETS
from tests.conftest import build_hf_model


def test_sharded_checkpoint_loads_identically(tiny_dir, tmp_path) -> None:
    model = build_hf_model("qwen2")
    model.save_pretrained(str(tmp_path), max_shard_size="100KB")
    assert (tmp_path / "model.safetensors.index.json").exists()
    assert len(list(tmp_path.glob("*.safetensors"))) > 1
    ids = list(range(1, 30))
    sharded = engine.load(str(tmp_path), device="cpu", cache_tokens=256).logits(ids)
    single = engine.load(str(tiny_dir("qwen2")), device="cpu", cache_tokens=256).logits(ids)
    assert torch.equal(sharded, single)


def test_no_tokenizer_token_ids_still_work(tiny_dir) -> None:
    e = engine.load(str(tiny_dir("llama")), device="cpu", cache_tokens=256)
    assert len(e.generate([5, 6, 7], max_new_tokens=3).token_ids) == 3
    with pytest.raises(TokenizerMissingError, match="no tokenizer files"):
        e.generate("some text", max_new_tokens=3)
    with pytest.raises(TokenizerMissingError):
        e.render([{"role": "user", "content": "hi"}])


def test_info_records_identity(tiny_dir) -> None:
    e = engine.load(str(tiny_dir("qwen2")), device="cpu", cache_tokens=256)
    info = e.info
    assert info["source"] == "local" and not info["synthetic_weights"]
    assert len(info["weights_digest"]) == 64 and info["dtype"] == "float32" and info["device"] == "cpu"
    assert info["torch"] == torch.__version__


def test_digest_changes_with_weights(tiny_dir, tmp_path) -> None:
    other = tmp_path / "other"
    build_hf_model("qwen2", seed=7).save_pretrained(str(other))
    a = engine.load(str(tiny_dir("qwen2")), device="cpu", cache_tokens=256).source.digest
    b = engine.load(str(other), device="cpu", cache_tokens=256).source.digest
    assert a != b


def test_rope_theta_from_either_key() -> None:
    base = {
        "architectures": ["Qwen2ForCausalLM"],
        "vocab_size": 10,
        "hidden_size": 8,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "intermediate_size": 16,
    }
    assert ModelConfig.from_hf(base | {"rope_theta": 123.0}).rope_theta == 123.0
    nested = base | {"rope_parameters": {"rope_type": "default", "rope_theta": 456.0}}
    assert ModelConfig.from_hf(nested).rope_theta == 456.0
    qwen3 = base | {"architectures": ["Qwen3ForCausalLM"], "head_dim": 16}
    cfg = ModelConfig.from_hf(qwen3)
    assert cfg.head_dim == 16 and cfg.qk_norm and not cfg.qkv_bias


def test_synthetic_presets_have_real_shapes() -> None:
    q = SYNTHETIC_PRESETS["qwen2.5-0.5b"]
    assert (q.hidden_size, q.num_layers, q.num_heads, q.num_kv_heads, q.head_dim, q.intermediate_size) == (
        896,
        24,
        14,
        2,
        64,
        4864,
    )
    q3 = SYNTHETIC_PRESETS["qwen3-0.6b"]
    assert (q3.hidden_size, q3.num_layers, q3.num_heads, q3.num_kv_heads, q3.head_dim) == (
        1024,
        28,
        16,
        8,
        128,
    )
    q7 = SYNTHETIC_PRESETS["qwen2.5-7b"]
    assert (q7.hidden_size, q7.num_layers, q7.num_heads, q7.num_kv_heads, q7.vocab_size) == (
        3584,
        28,
        28,
        4,
        152064,
    )
    assert not q7.tie_word_embeddings


def test_synthetic_model_is_seeded_and_labelled() -> None:
    a = engine.load("synthetic:qwen2.5-0.5b", device="cpu", cache_tokens=256)
    assert a.info["synthetic_weights"] and a.info["source"] == "synthetic"
    ids = a.tokenizer("Hello, world! 你好").input_ids
    assert ids == [9707, 11, 1879, 0, 220, 108386]
    first = a.logits(ids)[-1]
    again = engine.load("synthetic:qwen2.5-0.5b", device="cpu", cache_tokens=256).logits(ids)[-1]
    other = engine.load("synthetic:qwen2.5-0.5b", device="cpu", cache_tokens=256, seed=1)
    assert torch.equal(first, again)
    assert not torch.equal(first, other.logits(ids)[-1]) and other.source.digest != a.source.digest


def test_tiny_qwen_preset_counts_qwen_tokens_in_a_32k_context() -> None:
    """synthetic:qwen2.5-tiny: 2 layers of width 64 under Qwen2.5-0.5B's vocabulary, tokenizer, template, stop
    ids and 32,768-token context, loaded by the engine's own loader and labelled as random weights."""
    tiny, real = resolve("synthetic:qwen2.5-tiny"), resolve("synthetic:qwen2.5-0.5b")
    c = tiny.config
    assert (c.arch, c.hidden_size, c.num_layers, c.num_heads, c.num_kv_heads, c.head_dim) == (
        "qwen2",
        64,
        2,
        4,
        2,
        16,
    )
    assert (c.vocab_size, c.max_position_embeddings) == (
        real.config.vocab_size,
        real.config.max_position_embeddings,
    )
    assert c.max_position_embeddings == 32768 and c.vocab_size == 151936
    assert (tiny.tokenizer_dir, tiny.eos_ids) == (real.tokenizer_dir, real.eos_ids)
    e = engine.load("synthetic:qwen2.5-tiny", device="cpu", cache_tokens=256)
    assert e.info["synthetic_weights"] and e.info["source"] == "synthetic"
    assert e.tokenizer("Hello, world! 你好").input_ids == [9707, 11, 1879, 0, 220, 108386]
    chat = e.tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    assert chat.startswith("<|im_start|>system\nYou are Qwen") and chat.endswith("<|im_start|>assistant\n")
    assert len(e.generate("Hello", max_new_tokens=3).token_ids) == 3
    with pytest.raises(ContextOverflowError, match="context of 32768 tokens"):
        e.generate([1] * 32767, max_new_tokens=2)


def test_hf_config_roundtrip(tiny_dir) -> None:
    """to_hf() writes a config that reads back to the same shape (used for converted GGUF folders)."""
    cfg = engine.load(str(tiny_dir("qwen3")), device="cpu", cache_tokens=256).config
    assert ModelConfig.from_hf(json.loads(json.dumps(cfg.to_hf()))) == cfg
