"""Shared fixtures: tiny random-weight models built with `transformers` and saved as safetensors, and the
device and dtype of the run.

    python -m pytest --device cuda --dtype bfloat16   # default: --device cpu --dtype float32

The parity, prefix-cache, attention and layout tests load their engines on that device in that dtype (the
`load` and `eng` fixtures) and take their tolerances from `precision` (tests/precision.py). A device that is
absent, or a dtype it cannot run, stops the run at startup with one line.

Everything here is offline: no Hugging Face hub access, no downloads.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import torch

from engine.devices import dtype_name, resolve_device, resolve_dtype
from engine.errors import DeviceError
from tests.precision import Precision

if TYPE_CHECKING:
    from engine.runtime.engine import Engine

os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch.set_num_threads(min(2, os.cpu_count() or 1))
TARGET = pytest.StashKey[tuple[torch.device, torch.dtype]]()
PRECISION = pytest.StashKey[Precision]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kvtestbed device")
    group.addoption("--device", default="cpu", help="cpu (default), cuda, cuda:N or mps")
    group.addoption("--dtype", default="float32", help="float32 (default), bfloat16 or float16")


def pytest_configure(config: pytest.Config) -> None:
    """Resolve --device and --dtype once, before collection: an unavailable one ends the run in one line."""
    try:
        device = resolve_device(config.getoption("device"))
        config.stash[TARGET] = (device, resolve_dtype(config.getoption("dtype"), device))
    except DeviceError as e:
        raise pytest.UsageError(str(e)) from None


def pytest_report_header(config: pytest.Config) -> str:
    device, dtype = config.stash[TARGET]
    return f"kvtestbed: device {device}, dtype {dtype_name(dtype)}"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """In half precision, the measured reference errors the tolerances were derived from."""
    precision = config.stash.get(PRECISION, None)
    if precision is not None and precision.measured:
        where = f"transformers {dtype_name(precision.dtype)} on {precision.device} against its float32 on cpu"
        terminalreporter.section(where)
        for kind, e in precision.measured.items():
            seen = [what for what in ("logits", "attention") if (kind, what) in precision.observed]
            ours = ", ".join(f"{what} {precision.observed[(kind, what)]:.2f} E" for what in seen)
            terminalreporter.line(
                f"{kind}: E = max |dlogit| {e.logits:.4g} ({e.relative:.2%} of max |logit|), max |dprob| "
                f"{e.attention:.3g}; ours at most {ours or '(not compared)'}; tolerances: logits "
                f"{precision.logits_tol(kind):.3g}, attention {precision.attention_tol(kind):.3g}, cached "
                f"{precision.cache_tol(kind):.3g}"
            )


TINY = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=8192,
)


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


# RoPE scalings of the tiny long-context models: a 64-token original window, so that prompts of a few hundred
# tokens reach far past it.
SCALINGS: dict[str, dict] = {
    "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64},
    "llama3": {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 64,
    },
}
SCALED_CONTEXT = 256  # max_position_embeddings of the scaled models (YaRN: also factor x 64)


def scaled_overrides(scaling: str | None) -> dict:
    """build_hf_model overrides for a model with that RoPE scaling (None: none)."""
    if scaling is None:
        return {}
    return {"rope_scaling": dict(SCALINGS[scaling]), "max_position_embeddings": SCALED_CONTEXT}


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """tiny_dir(kind, tokenizer=False, scaling=None) -> folder with config.json + model.safetensors (+ Qwen
    tokenizer); `scaling` names one of SCALINGS."""
    made: dict[tuple, Path] = {}

    def make(kind: str, tokenizer: bool = False, scaling: str | None = None) -> Path:
        key = (kind, tokenizer, scaling)
        if key not in made:
            name = f"{kind}{'-tok' if tokenizer else ''}{f'-{scaling}' if scaling else ''}"
            folder = tmp_path_factory.mktemp(name)
            model = build_hf_model(kind, vocab_size=151936 if tokenizer else 512, **scaled_overrides(scaling))
            model.save_pretrained(str(folder), safe_serialization=True)
            if tokenizer:
                from engine.loading.tokenizer import load_tokenizer, qwen_tokenizer_dir

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
def device(pytestconfig: pytest.Config) -> torch.device:
    return pytestconfig.stash[TARGET][0]


@pytest.fixture(scope="session")
def dtype(pytestconfig: pytest.Config) -> torch.dtype:
    return pytestconfig.stash[TARGET][1]


@pytest.fixture(scope="session")
def precision(pytestconfig: pytest.Config, device: torch.device, dtype: torch.dtype) -> Precision:
    """Tolerances for this device and dtype, measured on transformers itself (tests/precision.py)."""
    pytestconfig.stash[PRECISION] = Precision(device, dtype, build_hf_model)
    return pytestconfig.stash[PRECISION]


@pytest.fixture(scope="session")
def load(device: torch.device, dtype: torch.dtype) -> Callable[..., Engine]:
    """load(model, **options) -> an engine on the run's device, in its dtype."""
    import engine

    return lambda model, **options: engine.load(
        str(model), device=str(device), dtype=dtype_name(dtype), **options
    )


@pytest.fixture(scope="session")
def smollm2() -> Engine:
    """The bundled real model (SmolLM2-135M-Instruct, GGUF Q4_1, dequantized) on CPU in float32: the analyses
    and their committed numbers are float32 ones."""
    import engine

    return engine.load("smollm2-135m", device="cpu", cache_tokens=8192)


@pytest.fixture(scope="session")
def smollm2_on_device(request: pytest.FixtureRequest, load: Callable[..., Engine]) -> Engine:
    """SmolLM2 on the run's device and dtype: the `smollm2` engine itself in a default (CPU float32) run."""
    device, dtype = request.config.stash[TARGET]
    if (device.type, dtype) == ("cpu", torch.float32):
        return request.getfixturevalue("smollm2")
    return load("smollm2-135m", cache_tokens=8192)


@pytest.fixture
def eng(load: Callable[..., Engine], tiny_dir: Callable[..., Path]) -> Engine:
    """A tiny Qwen2 engine with its own 1,024-token prefix cache in blocks of 16."""
    return load(tiny_dir("qwen2"), block_size=16, cache_tokens=1024)


@pytest.fixture(scope="session")
def cache_tol(precision: Precision) -> float:
    """Cached against uncached (and the other our-path-against-our-path checks) on the `eng` model."""
    return precision.cache_tol("qwen2")


def random_ids(n: int, seed: int) -> list[int]:
    """Seeded token ids in [3, 512), the tiny models' vocabulary without its first ids."""
    return torch.randint(3, 512, (n,), generator=torch.Generator().manual_seed(seed)).tolist()
