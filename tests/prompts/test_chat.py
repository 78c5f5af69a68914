"""Chat rendering: a prefill continues the assistant's text; a system message after the first is rendered
where the template allows it, else merged into the nearest user message; the tool-call format a template
teaches, and the generic one taught where it has none."""

from __future__ import annotations

import copy

import pytest
from transformers import PreTrainedTokenizerBase

from engine.errors import PromptError
from engine.loading.tokenizer import load_tokenizer, qwen_tokenizer_dir
from engine.prompts.chat import GENERIC, HERMES, merge_mid_system, render_text, tool_format

PREFILL = [{"role": "user", "content": "What is 2 + 2?"}, {"role": "assistant", "content": "The answer is"}]
STRICT = (  # a template that refuses a system message anywhere but first, as Gemma's and Mistral's do
    "{% for m in messages %}{% if m.role == 'system' and not loop.first %}"
    "{{ raise_exception('system only first') }}{% endif %}<{{ m.role }}>{{ m.content }}</s>{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)


@pytest.fixture(scope="module", params=["smollm2", "qwen2.5"])
def tokenizer(request: pytest.FixtureRequest) -> PreTrainedTokenizerBase:
    if request.param == "qwen2.5":
        return load_tokenizer(qwen_tokenizer_dir())
    return request.getfixturevalue("smollm2").tokenizer


def test_a_prefill_is_continued_not_closed(tokenizer: PreTrainedTokenizerBase) -> None:
    text = render_text(tokenizer, PREFILL, continue_final=True)
    assert text.endswith("<|im_start|>assistant\nThe answer is")  # no end of turn, no new turn
    closed = render_text(tokenizer, PREFILL)
    assert closed.startswith(text) and closed.endswith("<|im_end|>\n<|im_start|>assistant\n")
    with pytest.raises(PromptError, match="final assistant message"):
        render_text(tokenizer, PREFILL[:1], continue_final=True)


def test_a_mid_conversation_system_message_where_the_template_allows_it(
    tokenizer: PreTrainedTokenizerBase,
) -> None:
    messages = [*PREFILL, {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Why?"}]
    assert "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhy?" in render_text(
        tokenizer, messages
    )


def test_a_template_that_refuses_it_gets_it_merged(tokenizer: PreTrainedTokenizerBase) -> None:
    strict = copy.copy(tokenizer)
    strict.chat_template = STRICT
    messages = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "Hi"},
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Why?"},
        {"role": "assistant", "content": "Because."},
        {"role": "system", "content": "Last."},
    ]
    text = render_text(strict, messages)
    assert (
        text
        == "<system>S</s><user>Hi</s><user>Be brief.\n\nWhy?\n\nLast.</s><assistant>Because.</s><assistant>"
    )
    assert tokenizer.chat_template != STRICT
    assert merge_mid_system([{"role": "assistant", "content": "A"}, {"role": "system", "content": "S"}]) == [
        {"role": "assistant", "content": "A"},
        {"role": "user", "content": "S"},
    ]


def test_the_generic_tool_format_is_taught(tokenizer: PreTrainedTokenizerBase) -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    text = render_text(tokenizer, PREFILL[:1], tools)
    if tool_format(tokenizer) == GENERIC:
        assert '"name": "f"' in text and '<tool_call>\n{"name": <function-name>, "arguments"' in text
    else:
        assert tool_format(tokenizer) == HERMES and "<tools>" in text
