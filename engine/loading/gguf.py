"""GGUF -> a Hugging Face style folder (config.json, model.safetensors, tokenizer) in the user cache.

Dequantizing a GGUF takes seconds and `transformers` needs more to read its tokenizer, so this runs
once per file; later loads read the folder. The folder is keyed by the GGUF's sha256, which is also
the model's weights digest, and its `source.json` records the sha256 of every file converted into it: a
later load checks them (memoised by size and mtime, see `digests.py`), and a folder whose files differ
from what was written (truncated, overwritten, partly deleted) is converted again, with a notice, rather
than served under the GGUF's digest.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import save_file

from engine.errors import UnsupportedModelError, WeightsError
from engine.loading.digests import file_sha256, remember, sha256_of
from engine.loading.paths import cache_root, cache_write_error, writable_cache_folder
from engine.model.config import ModelConfig

# GGUF tensor name (after "blk.N.") -> Hugging Face name (after "model.layers.N.").
_LAYER_NAMES = {
    "attn_norm.weight": "input_layernorm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_q.bias": "self_attn.q_proj.bias",
    "attn_k.bias": "self_attn.k_proj.bias",
    "attn_v.bias": "self_attn.v_proj.bias",
    "attn_output.weight": "self_attn.o_proj.weight",
    "attn_q_norm.weight": "self_attn.q_norm.weight",
    "attn_k_norm.weight": "self_attn.k_norm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
_TOP_NAMES = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight"}
_TOP_NAMES["output.weight"] = "lm_head.weight"
ROPE_FREQS = "rope_freqs.weight"  # llama.cpp's Llama 3 rope scaling: each frequency pair's divisor


def _hf_name(name: str) -> str:
    """Our Hugging Face name for a GGUF tensor; a tensor we would not use is refused, never skipped."""
    if name in _TOP_NAMES:
        return _TOP_NAMES[name]
    parts = name.split(".", 2)
    if parts[0] == "blk" and len(parts) == 3 and parts[2] in _LAYER_NAMES:
        return f"model.layers.{parts[1]}.{_LAYER_NAMES[parts[2]]}"
    raise UnsupportedModelError(f"GGUF tensor {name} is not implemented; refused rather than ignored")


def _as_float32(tensor: Any) -> np.ndarray:
    from gguf.quants import dequantize

    return np.asarray(dequantize(tensor.data, tensor.tensor_type), dtype=np.float32)


def _unpermute(w: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp stores Llama's q/k rows interleaved for its RoPE; undo it to get rotate-half order."""
    return w.reshape(heads, w.shape[0] // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _metadata(reader: Any) -> dict[str, Any]:
    meta = {}
    for key, field in reader.fields.items():
        if key.startswith("tokenizer.ggml.") and key != "tokenizer.ggml.pre":
            continue  # large token lists; the tokenizer is read by transformers
        try:
            meta[key] = field.contents()
        except Exception:  # noqa: BLE001 - an unreadable optional field is skipped, required ones fail later
            continue
    if "tokenizer.ggml.tokens" in reader.fields:  # only its length is kept: the vocabulary size
        meta["tokenizer.ggml.tokens"] = range(len(reader.fields["tokenizer.ggml.tokens"].data))
    return meta


def _open(path: Path) -> Any:
    """A GGUFReader over the file; a wrong magic, a truncated or a corrupt file is one WeightsError line."""
    import gguf

    with open(path, "rb") as f:
        magic = f.read(4)
    if magic != b"GGUF":
        raise WeightsError(f"{path} is not a GGUF file (it starts with {magic!r}, not b'GGUF')")
    try:
        return gguf.GGUFReader(str(path))
    except (ValueError, KeyError, IndexError, OSError) as e:  # numpy's complaints about the bytes it lacks
        raise WeightsError(
            f"cannot read GGUF file {path}: truncated or corrupt ({path.stat().st_size:,} bytes; "
            f"the reader failed with {type(e).__name__})"
        ) from None


def convert_gguf(path: Path, digest: str) -> Path:
    """Return the converted folder for this GGUF, converting on first use or when the folder's files no
    longer match the digests recorded when it was written."""
    out = cache_root() / "gguf" / digest[:32]
    if out.exists():
        problem = _damage(out)
        if problem is None:
            return out
        print(f"[{out} {problem}: converting {path} again]", file=sys.stderr)
    # checked before the work it would store; one temporary folder per process, so two never mix
    tmp = writable_cache_folder("gguf") / f"{out.name}.{os.getpid()}.tmp"
    tensors, config, meta = _dequantized(path)
    try:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        save_file(tensors, str(tmp / "model.safetensors"))
        specials = {k: meta.get(f"tokenizer.ggml.{k}") for k in ("bos_token_id", "eos_token_id")}
        (tmp / "config.json").write_text(json.dumps(config.to_hf() | specials, indent=2))
        _save_tokenizer(path, tmp)
        files = {p.name: sha256_of(p) for p in sorted(tmp.iterdir()) if p.is_file()}
        record = {"gguf": str(path), "sha256": digest, "files": files}
        (tmp / "source.json").write_text(json.dumps(record, indent=2))
        shutil.rmtree(out, ignore_errors=True)
        tmp.replace(out)
    except OSError as e:
        raise cache_write_error(tmp, e) from None
    for name, file_digest in files.items():  # renamed, each file kept its size and mtime: not read again
        remember(out / name, file_digest)
    return out


def _damage(out: Path) -> str | None:
    """None when the folder `out` holds every file its source.json records, each with the recorded sha256;
    else what is wrong with it."""
    if not (out / "model.safetensors").is_file():
        return "has no model.safetensors"
    try:
        record = json.loads((out / "source.json").read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        record = None
    files = record.get("files") if isinstance(record, dict) else None
    if not isinstance(files, dict) or not files:
        return "records no digests of its files"
    for name, recorded in files.items():
        file = out / name
        if not file.is_file():
            return f"lacks {name}"
        if file_sha256(file) != recorded:
            return f"holds a {name} that differs from the one converted (sha256 mismatch)"
    return None


def _dequantized(path: Path) -> tuple[dict[str, torch.Tensor], ModelConfig, dict[str, Any]]:
    """Every tensor of the GGUF dequantized to float32 under its Hugging Face name (but `rope_freqs.weight`,
    read into the config), the config, the metadata."""

    reader = _open(path)
    try:
        meta = _metadata(reader)
        by_name = {t.name: t for t in reader.tensors}
        freqs = by_name.pop(ROPE_FREQS, None)  # Llama 3 rope scaling: read into the config, not a weight
        rope_freqs = None if freqs is None else _as_float32(freqs).reshape(-1).tolist()
        config = ModelConfig.from_gguf(meta, "output.weight" in by_name, rope_freqs)
        tensors: dict[str, torch.Tensor] = {}
        for t in by_name.values():
            hf = _hf_name(t.name)
            w = _as_float32(t)
            if config.arch == "llama" and t.name.endswith(("attn_q.weight", "attn_k.weight")):
                w = _unpermute(w, config.num_heads if "attn_q" in t.name else config.num_kv_heads)
            tensors[hf] = torch.from_numpy(np.array(w, copy=True))
    except (ValueError, KeyError, IndexError, OSError) as e:
        raise WeightsError(f"cannot read GGUF file {path}: {e}") from None
    return tensors, config, meta


def _save_tokenizer(path: Path, folder: Path) -> None:
    """The GGUF's tokenizer as transformers reads it, saved into `folder` (or why it could not be)."""
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        tok.save_pretrained(str(folder))
    except (ValueError, KeyError, OSError) as e:  # weights still load: token-id APIs keep working
        (folder / "tokenizer_error.txt").write_text(f"transformers could not read the GGUF tokenizer: {e}\n")
