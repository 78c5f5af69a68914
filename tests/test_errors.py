"""Every way a user can get it wrong ends in one typed error with a clear message, never a wrong answer."""

from __future__ import annotations

import subprocess
import sys

import pytest

import engine
from engine.errors import (
    ContextOverflowError,
    DeviceError,
    ModelNotFoundError,
    PromptError,
    UnsupportedModelError,
    WeightsError,
)
from engine.loading.sources import alias_path
from tests.conftest import edit_config


def test_missing_model_path(tmp_path) -> None:
    with pytest.raises(ModelNotFoundError, match="not found"):
        engine.load(str(tmp_path / "nowhere" / "model.bin.x"))


def test_hub_id_not_cached_fails_at_once(monkeypatch) -> None:
    with pytest.raises(ModelNotFoundError, match="not in the local Hugging Face cache"):
        engine.load("no-such-org/no-such-model-xyz")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)  # the online attempt fails fast without network too
    with pytest.raises(ModelNotFoundError, match="could not be downloaded"):
        engine.load("no-such-org/no-such-model-xyz")


def test_folder_without_config(tmp_path) -> None:
    with pytest.raises(ModelNotFoundError, match="no config.json"):
        engine.load(str(tmp_path))


def test_unknown_architecture(copy_of) -> None:
    folder = copy_of()
    edit_config(folder, architectures=["GPT2LMHeadModel"], model_type="gpt2")
    with pytest.raises(UnsupportedModelError, match="unknown architecture GPT2LMHeadModel"):
        engine.load(str(folder))


def test_unsupported_rope_scaling(copy_of) -> None:
    folder = copy_of()
    edit_config(folder, rope_parameters={"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 4.0})
    with pytest.raises(UnsupportedModelError, match="'dynamic'.*breaks prefix reuse"):
        engine.load(str(folder))


def test_corrupt_safetensors(copy_of) -> None:
    folder = copy_of()
    (folder / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00not a header at all")
    with pytest.raises(WeightsError, match="cannot read"):
        engine.load(str(folder))


def test_truncated_safetensors(copy_of) -> None:
    folder = copy_of()
    data = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(WeightsError):
        engine.load(str(folder))


def test_pickled_weights_are_refused(copy_of) -> None:
    folder = copy_of()
    (folder / "model.safetensors").rename(folder / "pytorch_model.bin")
    with pytest.raises(WeightsError, match="pickled weights are never loaded"):
        engine.load(str(folder))


def test_shape_mismatch_names_tensor_and_shapes(copy_of) -> None:
    folder = copy_of()
    edit_config(folder, intermediate_size=96)
    with pytest.raises(
        WeightsError,
        match=r"model\.layers\.0\.mlp\.gate_proj\.weight has shape \(128, 64\) "
        r"but the config implies \(96, 64\)",
    ):
        engine.load(str(folder))


def test_missing_tensor(copy_of) -> None:
    folder = copy_of()
    edit_config(folder, num_hidden_layers=3)
    with pytest.raises(WeightsError, match=r"lacks tensor model\.layers\.2\."):
        engine.load(str(folder))


@pytest.mark.parametrize("cut", [0.5, 0.999])
def test_corrupt_or_truncated_gguf(tmp_path, cut: float) -> None:
    data = alias_path("smollm2-135m").read_bytes()
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(data[: int(len(data) * cut)])
    with pytest.raises(WeightsError, match="cannot read GGUF"):
        engine.load(str(bad))


def test_garbage_gguf(tmp_path) -> None:
    bad = tmp_path / "garbage.gguf"
    bad.write_bytes(b"GGUF" + b"\xff" * 64)
    with pytest.raises(WeightsError, match="cannot read GGUF"):
        engine.load(str(bad))


@pytest.mark.parametrize(
    ("device", "message"),
    [("tpu", "unknown device"), ("cuda", "CUDA is not available"), ("mps", "MPS is not available")],
)
def test_bad_or_absent_device(tiny_dir, device: str, message: str) -> None:
    import torch

    if (device == "cuda" and torch.cuda.is_available()) or (
        device == "mps" and torch.backends.mps.is_available()
    ):
        pytest.skip(f"{device} exists on this machine")
    with pytest.raises(DeviceError, match=message):
        engine.load(str(tiny_dir("qwen2")), device=device)


def test_unknown_dtype(tiny_dir) -> None:
    with pytest.raises(DeviceError, match="unknown dtype 'float8'"):
        engine.load(str(tiny_dir("qwen2")), dtype="float8")


def test_empty_prompts(tiny_dir) -> None:
    e = engine.load(str(tiny_dir("qwen2", tokenizer=True)), device="cpu", cache_tokens=256)
    for prompt in ("", [], [{"role": "user"}]):
        with pytest.raises(PromptError):
            e.generate(prompt, max_new_tokens=4)


def test_context_overflow_is_refused_not_truncated(tiny_dir) -> None:
    e = engine.load(str(tiny_dir("qwen2")), device="cpu", cache_tokens=8192 + 64)
    limit = e.config.max_position_embeddings
    with pytest.raises(ContextOverflowError, match=f"exceeds the model's context of {limit} tokens"):
        e.generate([1] * (limit - 3), max_new_tokens=4)
    assert len(e.generate([1] * (limit - 4), max_new_tokens=4).token_ids) <= 4  # exactly at the limit is fine


def test_token_ids_outside_vocabulary(tiny_dir) -> None:
    e = engine.load(str(tiny_dir("qwen2")), device="cpu", cache_tokens=256)
    with pytest.raises(PromptError, match="outside the vocabulary"):
        e.generate([1, 2, 99999], max_new_tokens=2)


@pytest.mark.parametrize(
    "args",
    [
        ["--model", "/no/such/model"],
        ["--model", "smollm2-135m", "--dtype", "fp7"],
        ["--model", "smollm2-135m", "--prompt", "  "],
    ],
)
def test_cli_prints_one_line_and_exits_2(args: list[str]) -> None:
    argv = [sys.executable, "-m", "engine.generate", "--prompt", "hi", *args]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, proc.stderr
