"""Issue 12's bad API arguments, one table row each: `load`, `generate`, prompts and tools give one typed
error line before any work; stop strings and multi-part content mean what OpenAI means by them."""

from __future__ import annotations

import math

import pytest
import torch

import engine
from engine.errors import CacheCapacityError, InvalidArgumentError, NumericalError, PromptError

LOAD_CASES = [
    pytest.param(
        {"cache_gb": 0}, InvalidArgumentError, r"cache_gb must be greater than 0, got 0", id="cache_gb 0"
    ),
    pytest.param(
        {"cache_gb": -1.5}, InvalidArgumentError, r"cache_gb must be greater than 0", id="cache_gb -1.5"
    ),
    pytest.param(
        {"cache_gb": math.nan}, InvalidArgumentError, r"cache_gb must be a finite number", id="gb nan"
    ),
    pytest.param(
        {"cache_tokens": 0}, InvalidArgumentError, r"cache_tokens must be at least 1, got 0", id="tokens 0"
    ),
    pytest.param(
        {"cache_tokens": 64.5}, InvalidArgumentError, r"cache_tokens must be an integer", id="tokens 64.5"
    ),
    pytest.param(
        {"block_size": 0}, InvalidArgumentError, r"block_size must be at least 1, got 0", id="block_size 0"
    ),
    pytest.param(
        {"block_size": -16}, InvalidArgumentError, r"block_size must be at least 1, got -16", id="bs -16"
    ),
    pytest.param(
        {"cache_tokens": 8}, CacheCapacityError, r"8 tokens holds no block of 16", id="under one block"
    ),
    pytest.param(
        {"cache_gb": 1e6},
        CacheCapacityError,
        r"needs 1,000,000\.00 GiB but only [\d,.]+ GiB of .* is left",
        id="cache_gb 1e6",
    ),
    pytest.param(
        {"model": 123}, InvalidArgumentError, r"model must be a string, got int 123", id="model int"
    ),
    pytest.param({"seed": "abc"}, InvalidArgumentError, r"seed must be an integer, got 'abc'", id="seed str"),
    pytest.param({"seed": -1}, InvalidArgumentError, r"seed must be at least 0, got -1", id="seed -1"),
    pytest.param(
        {"seed": 2**64},
        InvalidArgumentError,
        r"seed must be at most 18446744073709551615, got 18446744073709551616",
        id="seed 2**64",
    ),
    pytest.param(
        {"cache_tokens": 64, "cache_gb": 1},
        InvalidArgumentError,
        r"cache_tokens \(64\) and cache_gb \(1\) both size the KV cache: give one of them",
        id="cache_tokens and cache_gb",
    ),
    pytest.param(
        {"prefill_chunk": 0}, InvalidArgumentError, r"prefill_chunk must be at least 1", id="chunk 0"
    ),
    pytest.param(
        {"max_num_seqs": 0}, InvalidArgumentError, r"max_num_seqs must be at least 1", id="max_num_seqs 0"
    ),
    pytest.param(
        {"cache": "yes"}, InvalidArgumentError, r"cache must be True or False, got 'yes'", id="cache str"
    ),
    # an unknown keyword is Python's own TypeError, raised at the call before any work (no **options)
    pytest.param(
        {"cache_size": 3}, TypeError, r"unexpected keyword argument 'cache_size'", id="unknown option"
    ),
]


@pytest.mark.parametrize(("options", "error", "message"), LOAD_CASES)
def test_bad_load_arguments(tiny_dir, options, error, message) -> None:
    with pytest.raises(error, match=message):
        engine.load(**{"model": str(tiny_dir("qwen2")), "device": "cpu"} | options)


GENERATE_CASES = [
    pytest.param({"temperature": -1}, r"temperature must be at least 0\.0, got -1", id="temperature -1"),
    pytest.param(
        {"temperature": math.nan}, r"temperature must be a finite number, got nan", id="temperature nan"
    ),
    pytest.param(
        {"temperature": math.inf}, r"temperature must be a finite number, got inf", id="temperature inf"
    ),
    pytest.param({"top_p": 0}, r"top_p must be greater than 0, got 0", id="top_p 0"),
    pytest.param({"top_p": 1.5}, r"top_p must be at most 1\.0, got 1\.5", id="top_p 1.5"),
    pytest.param({"top_p": math.nan}, r"top_p must be a finite number", id="top_p nan"),
    pytest.param(
        {"max_new_tokens": 2.5}, r"max_new_tokens must be an integer, got 2\.5", id="max_new_tokens 2.5"
    ),
    pytest.param({"max_new_tokens": 0}, r"max_new_tokens must be at least 1, got 0", id="max_new_tokens 0"),
    pytest.param({"seed": "abc"}, r"seed must be an integer, got 'abc'", id="seed str"),
    pytest.param({"seed": 2**64}, r"seed must be at most 18446744073709551615, got 1844", id="seed 2**64"),
    pytest.param({"stop": [""]}, r"stop\[0\] is an empty string", id="stop empty"),
    pytest.param({"stop": 5}, r"stop must be a string or a list of strings, got int", id="stop int"),
    pytest.param(
        {"stop": ["ok", "\ud800"]},
        r"stop\[1\] holds a lone surrogate '\\ud800' at character 0",
        id="stop surrogate",
    ),
    pytest.param({"cache": "no"}, r"cache must be True or False, got 'no'", id="cache str"),
    pytest.param({"cache_salt": 3}, r"cache_salt must be a string, got int 3", id="cache_salt int"),
    pytest.param({"on_token": "print"}, r"on_token must be a function", id="on_token str"),
]


@pytest.mark.parametrize(("options", "message"), GENERATE_CASES)
def test_bad_generate_arguments(eng, options, message) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        eng.generate(**{"prompt": [5, 6, 7], "max_new_tokens": 2} | options)
    assert eng.cache_stats()["lookups"] == 0  # refused before any work


@pytest.mark.parametrize(("value", "message"), [(-1, "at least 0, got -1"), (1.5, "an integer, got 1.5")])
def test_attention_max_new_tokens_is_checked_not_read_as_zero(eng, value, message) -> None:
    with pytest.raises(InvalidArgumentError, match=f"max_new_tokens must be {message}"):
        eng.attention([5, 6, 7], max_new_tokens=value)


PROMPT_CASES = [
    pytest.param({"role": "user", "content": "hi"}, r"prompt must be text, .*; got dict", id="prompt dict"),
    pytest.param(5, r"prompt must be text, .*; got int", id="prompt int"),
    pytest.param(None, r"prompt must be text, .*; got NoneType", id="prompt None"),
    pytest.param(
        [1, 2.5],
        r"a prompt list holds chat messages \(dicts\) or token ids \(ints\); got 2\.5",
        id="ids float",
    ),
    pytest.param(
        "bad \ud83d text", r"prompt holds a lone surrogate '\\ud83d' at character 4", id="text surrogate"
    ),
    pytest.param(
        [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}],
        r"message 0 content part 0 is 'image_url': only text parts",
        id="image part",
    ),
]


@pytest.mark.parametrize(("prompt", "message"), PROMPT_CASES)
def test_bad_prompts(smollm2, prompt, message) -> None:
    with pytest.raises(PromptError, match=message):
        smollm2.generate(prompt, max_new_tokens=2)


def test_tools_as_a_string_are_refused_not_split(smollm2) -> None:
    with pytest.raises(PromptError, match=r"tools must be a list of tool definitions \(dicts\), got str"):
        smollm2.render([{"role": "user", "content": "hi"}], tools="lookup")


def test_multi_part_text_content_renders_as_its_joined_text(smollm2) -> None:
    parts = [{"type": "text", "text": "What is the capital"}, {"type": "text", "text": "of France?"}]
    joined = "What is the capital\nof France?"
    assert smollm2.render([{"role": "user", "content": parts}]) == smollm2.render(
        [{"role": "user", "content": joined}]
    )


def test_stop_is_a_string_or_a_list_and_cuts_at_the_earliest(smollm2) -> None:
    question = [{"role": "user", "content": "What is the capital of France?"}]
    assert smollm2.generate(question, max_new_tokens=24).text == "The capital of France is Paris."
    assert smollm2.generate(question, max_new_tokens=24, stop="Paris").text == "The capital of France is "
    assert smollm2.generate(question, max_new_tokens=24, stop=["France", "capital"]).text == "The "


def test_nan_logits_at_run_time_are_an_error_not_empty_text(eng) -> None:
    with torch.no_grad():
        eng.model.norm.weight.fill_(math.nan)  # what load refuses, done after it
    with pytest.raises(NumericalError, match="NaN or infinite logits"):
        eng.generate([5, 6, 7], max_new_tokens=4)
