"""The fewest tokens a text can take, known without tokenizing it: the cheap check that refuses a prompt far
over the context before the tokenizer sees it (tokenizing tens of megabytes takes minutes and gigabytes).

Characters per token are not at least 1 in a byte-level BPE: a character is 1 to 4 UTF-8 bytes and a rare
one takes a token per byte or two (an emoji is 3 tokens in SmolLM2's vocabulary; a CJK Extension B
character 4 in SmolLM2's, 3 in Qwen's). The bound runs the other way: a token covers at most as many
characters as it has bytes, and no token has more bytes than the longest of the vocabulary (`max_chars`:
SmolLM2 81, a newline and spaces; Qwen2.5 128, spaces), so a text of n characters takes at least
ceil(n / max_chars) tokens. Where the tokenizer composes characters first (NFC or NFKC, as Qwen's does), n
is the text's length if it is ASCII (its own normal form), else the larger of its ASCII characters and a
quarter of its characters (composition joins at most 4 code points into one character, and never two
ASCII ones). It holds for BPE over bytes (a ByteLevel pre-tokenizer, or byte fallback, and no unknown
token), whose every character is some bytes of some tokens; any other tokenizer (one that maps unknown text
to one unknown token, or normalizes otherwise) gets no bound (`max_chars` None), and its prompts are
tokenized before the context check.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from transformers import PreTrainedTokenizerBase

FORMS = ("NFC", "NFKC")  # the Unicode normalizations a bound can follow
COMPOSED = 4  # code points one composed character stands for, at most (U+1F82: alpha and three marks)


@dataclass(frozen=True)
class TokenBound:
    max_chars: int | None  # characters one token covers at most; None: no bound holds
    composes: bool = False  # the tokenizer normalizes to NFC or NFKC first (composing can shorten a text)

    @classmethod
    def of(cls, tokenizer: PreTrainedTokenizerBase) -> TokenBound:
        backend = getattr(tokenizer, "backend_tokenizer", None)
        if backend is None:  # a slow (Python) tokenizer: nothing to inspect
            return cls(None)
        model, forms = backend.model, _forms(_state(backend.normalizer))
        byte_level = "ByteLevel" in json.dumps(_state(backend.pre_tokenizer))
        byte_level = byte_level or bool(getattr(model, "byte_fallback", False))
        if type(model).__name__ != "BPE" or model.unk_token or not byte_level or forms is None:
            return cls(None)
        longest = max(
            map(len, backend.get_vocab(with_added_tokens=True))
        )  # a byte-level token: 1 char a byte
        return cls(longest, bool(forms))

    def fewest_tokens(self, text: str) -> int:
        """A lower bound on the tokens of `text` (0 when no bound holds for this tokenizer)."""
        if self.max_chars is None:
            return 0
        chars = len(text)
        if self.composes and not text.isascii():  # ASCII is its own normal form
            # Composition joins at most 4 code points into one character (U+1F82), never two ASCII ones.
            chars = max(len(text.encode("ascii", "ignore")), math.ceil(chars / COMPOSED))
        return math.ceil(chars / self.max_chars)


def _state(part: Any) -> Any:
    """A normalizer's or pre-tokenizer's JSON description (None when the tokenizer has none)."""
    return None if part is None else json.loads(part.__getstate__())


def _forms(normalizer: dict[str, Any] | None) -> list[str] | None:
    """The Unicode forms a normalizer applies ([] for none); None when it does anything else, which no
    character count can follow."""
    if normalizer is None:
        return []
    kind = normalizer.get("type")
    if kind in FORMS:
        return [kind]
    if kind == "Sequence":
        parts = [_forms(n) for n in normalizer.get("normalizers", [])]
        return None if any(p is None for p in parts) else [k for p in parts for k in p or []]
    return None
