"""The fewest tokens a text can take, without tokenizing it: never more than the tokenizer gives, on the texts
that pack the most characters into a token (runs of spaces and dashes) and the fewest (emoji, rare CJK,
combining marks that NFC composes), for SmolLM2's and Qwen's byte-level BPEs; no bound for a tokenizer
that maps unknown text to one token."""

from __future__ import annotations

import pytest
from tokenizers import Tokenizer, models
from transformers import PreTrainedTokenizerBase, PreTrainedTokenizerFast

from engine.loading.sources import resolve
from engine.loading.tokenizer import load_tokenizer, qwen_tokenizer_dir
from engine.prompts.token_bound import TokenBound

TEXTS = [
    " " * 5000,
    "-" * 5000,
    "\n" + " " * 4000,
    "#" * 3000 + "=" * 3000,
    "The prefix cache serves whole blocks. " * 200,
    "😀🧠" * 800,
    "𠀀" * 900,
    "e\u0301" * 1500,  # NFC composes each pair into one character
    "\u03b1\u0313\u0300\u0345" * 500,  # four code points NFC composes into one (U+1F82)
    "x" + "\u0301" * 3000,
    "0123456789" * 400,
    "中文文本，混合 ASCII text and 數字 12345. " * 100,
]


@pytest.fixture(scope="module", params=["smollm2", "qwen"])
def tokenizer(request: pytest.FixtureRequest) -> PreTrainedTokenizerBase:
    folder = resolve("smollm2-135m").tokenizer_dir if request.param == "smollm2" else qwen_tokenizer_dir()
    return load_tokenizer(folder)


def test_the_longest_token_bounds_every_text(tokenizer: PreTrainedTokenizerBase) -> None:
    bound = TokenBound.of(tokenizer)
    assert (bound.max_chars, bound.composes) in ((81, False), (128, True))  # SmolLM2; Qwen (NFC)
    for text in TEXTS:
        tokens = len(tokenizer(text, add_special_tokens=False).input_ids)
        fewest = bound.fewest_tokens(text)
        assert 0 < fewest <= tokens, (text[:20], fewest, tokens)
    vocab = tokenizer.backend_tokenizer.get_vocab(with_added_tokens=True)
    longest = tokenizer.decode([vocab[max(vocab, key=len)]]) * 1000  # the bound is tight: exact here
    assert len(tokenizer(longest, add_special_tokens=False).input_ids) == bound.fewest_tokens(longest) == 1000


def test_characters_per_token_can_be_below_one() -> None:
    """Why the bound is the longest token and not one character a token: rare characters take several."""
    smollm2 = load_tokenizer(resolve("smollm2-135m").tokenizer_dir)
    assert len(smollm2("😀" * 100, add_special_tokens=False).input_ids) == 300


def test_no_bound_where_unknown_text_is_one_token() -> None:
    word_piece = Tokenizer(models.WordPiece({"[UNK]": 0, "a": 1}, unk_token="[UNK]"))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=word_piece, unk_token="[UNK]")
    bound = TokenBound.of(tokenizer)
    assert bound.max_chars is None and bound.fewest_tokens("zzzz" * 1000) == 0
    assert len(tokenizer("zzzz" * 1000, add_special_tokens=False).input_ids) == 1
