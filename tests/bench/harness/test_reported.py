"""Cached tokens read from whichever field a server reports; absent is None ("not reported"), never 0."""

from __future__ import annotations

from engine.bench.harness.reported import (
    ANTHROPIC_CACHED,
    KVTESTBED_CACHED,
    LLAMA_CPP_CACHED,
    OPENAI_CACHED,
    from_anthropic,
    from_openai,
)


def test_openai_usage_and_its_details() -> None:
    r = from_openai(
        {"prompt_tokens": 100, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 64}},
        None,
        None,
    )
    assert (r.prompt_tokens, r.completion_tokens, r.cached_tokens, r.cached_source) == (
        100,
        5,
        64,
        OPENAI_CACHED,
    )
    miss = from_openai({"prompt_tokens": 100, "prompt_tokens_details": {"cached_tokens": 0}}, None, None)
    assert miss.cached_tokens == 0 and miss.cached_source == OPENAI_CACHED


def test_absent_is_not_reported_never_zero() -> None:
    # vLLM without --enable-prompt-tokens-details: usage, no details (or null details)
    for usage in (
        {"prompt_tokens": 100, "completion_tokens": 5},
        {"prompt_tokens": 9, "prompt_tokens_details": None},
    ):
        r = from_openai(usage, None, None)
        assert r.cached_tokens is None and r.cached_source == ""
    assert from_openai(None, None, None).prompt_tokens is None
    assert from_anthropic(None, None).cached_tokens is None
    assert from_openai({"prompt_tokens_details": {"cached_tokens": True}}, None, None).cached_tokens is None


def test_llama_cpp_timings_without_usage() -> None:
    r = from_openai(None, {"cache_n": 40, "prompt_n": 10, "predicted_n": 3}, None)
    assert (r.prompt_tokens, r.completion_tokens, r.cached_tokens, r.cached_source) == (
        50,
        3,
        40,
        LLAMA_CPP_CACHED,
    )


def test_the_kvtestbed_object_when_nothing_else_reports() -> None:
    r = from_openai({"prompt_tokens": 30}, None, {"cached_tokens": 16})
    assert r.cached_tokens == 16 and r.cached_source == KVTESTBED_CACHED


def test_anthropic_input_tokens_exclude_cache_reads_and_writes() -> None:
    usage = {
        "input_tokens": 10,
        "cache_read_input_tokens": 64,
        "cache_creation_input_tokens": 16,
        "output_tokens": 4,
    }
    r = from_anthropic(usage, None)
    assert (r.prompt_tokens, r.cached_tokens, r.cache_written_tokens, r.completion_tokens) == (90, 64, 16, 4)
    assert r.cached_source == ANTHROPIC_CACHED


def test_impossible_counts_are_kept_and_said_to_be_impossible() -> None:
    negative = from_openai(
        {"prompt_tokens": -5, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 0}},
        None,
        None,
    )
    assert negative.prompt_tokens == -5 and negative.problem == "negative count: usage.prompt_tokens -5"
    more = from_openai({"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": 32}}, None, None)
    assert more.problem == f"{OPENAI_CACHED} 32 > 10 prompt tokens"
    llama = from_openai(None, {"cache_n": 4, "prompt_n": -9, "predicted_n": 1}, None)
    assert llama.problem == "negative count: timings.prompt_n -9"
    anthropic = from_anthropic({"input_tokens": -3, "cache_read_input_tokens": 8, "output_tokens": 1}, None)
    assert anthropic.problem == "negative count: usage.input_tokens -3"
    written = from_anthropic({"input_tokens": 3, "cache_creation_input_tokens": -1}, None)
    assert written.problem == "negative count: usage.cache_creation_input_tokens -1"
    fine = from_openai({"prompt_tokens": 32, "prompt_tokens_details": {"cached_tokens": 31}}, None, None)
    assert fine.problem == "" and from_openai(None, None, None).problem == ""
