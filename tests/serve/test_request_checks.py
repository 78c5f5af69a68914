"""What a request is refused for before its stream opens (engine/serve/request_checks.py): stop strings over
the engine's bounds by the field's name in each API, a prompt over the context known from its length alone,
and what `Engine.add_request` would refuse (sampling arguments, more blocks than the KV cache has). The same
refusals through a server: tests/serve/test_pipeline.py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import engine
from engine.arguments import MAX_STOP_CHARS, MAX_STOP_STRINGS
from engine.errors import CacheCapacityError, ContextOverflowError, InvalidArgumentError
from engine.prompts.token_bound import TokenBound
from engine.serve.chat_request import ANTHROPIC, OPENAI, RESPONSES
from engine.serve.errors import APIError
from engine.serve.request_checks import check_engine, check_stop, refuse_far_over
from tests.serve.responses import request


@pytest.mark.parametrize(
    ("api", "field"), [(OPENAI, "stop"), (RESPONSES, "stop"), (ANTHROPIC, "stop_sequences")]
)
def test_stop_strings_over_the_bounds_are_refused_by_the_apis_field(api: str, field: str) -> None:
    check_stop(request(api, stop=["y" * MAX_STOP_CHARS] * MAX_STOP_STRINGS))  # at the bounds: passes
    for stop, says in (
        (["a"] * (MAX_STOP_STRINGS + 1), f"{field} takes at most {MAX_STOP_STRINGS}"),
        (["x" * (MAX_STOP_CHARS + 1)], f"{field}[0] has {MAX_STOP_CHARS + 1:,} characters"),
    ):
        with pytest.raises(APIError) as refused:
            check_stop(request(api, stop=stop))
        assert refused.value.status == 400 and refused.value.param == field
        assert str(refused.value.message).startswith(says), refused.value.message


def test_a_prompt_over_the_context_by_its_length_alone_is_refused() -> None:
    bound = TokenBound(max_chars=4)  # no token covers more than 4 characters
    refuse_far_over(bound, 10, "x" * 40)  # at least 10 tokens: the exact check decides
    with pytest.raises(
        ContextOverflowError, match=r"at least 11 tokens > 9 maximum .*41 characters, at most 4 a"
    ):
        refuse_far_over(bound, 10, "x" * 41)
    refuse_far_over(TokenBound(None), 10, "x" * 10_000)  # no bound holds: nothing refused here


def test_what_the_engine_would_refuse_is_refused_before_the_stream(tiny_dir: Callable[..., Path]) -> None:
    tiny = engine.load(str(tiny_dir("qwen2")), device="cpu", cache_tokens=64)  # 4 blocks of 16
    check_engine(tiny, request(), 64, 8)  # 4 blocks: held
    with pytest.raises(
        CacheCapacityError,
        match="request needs 5 KV blocks .65 tokens at 16 per block. but the cache holds 4",
    ):
        check_engine(tiny, request(), 65, 8)
    bad = request()
    bad.temperature = -1.0
    with pytest.raises(InvalidArgumentError, match="temperature"):
        check_engine(tiny, bad, 16, 8)
