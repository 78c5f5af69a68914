"""A trace request as the model sees it: regions from per-session cached message ends agree with
`render_prompt`; reply tokens are the model's own."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engine.loading.tokenizer import load_tokenizer, qwen_tokenizer_dir
from engine.prompts.regions import render_prompt
from engine.traces.load import load_trace
from engine.traces.rendering import TraceRenderer, reply_tail
from engine.traces.shipped import EXAMPLES


@pytest.fixture(scope="module")
def renderer() -> TraceRenderer:
    return TraceRenderer(load_tokenizer(qwen_tokenizer_dir()), [151645])


def test_regions_from_cached_ends_are_those_of_render_prompt(renderer: TraceRenderer) -> None:
    requests = load_trace(EXAMPLES["openai-chat"])
    edited = [{**requests[3].messages[0], "content": "Be brief."}, *requests[3].messages[1:]]
    for req in [*requests, replace(requests[3], messages=edited), requests[4]]:  # the edit breaks the cache
        prompt = renderer.prompt(req)
        ends = renderer.message_ends(req, prompt)
        reference = render_prompt(renderer.tokenizer, req.messages, req.tools)
        assert prompt.ids == reference.token_ids and renderer.regions(req, prompt, ends) == reference.regions


def test_reply_tail() -> None:
    assert reply_tail([1, 2], [1, 2, 3, 4, 9, 5], [9]) == [3, 4, 9]
    assert reply_tail([1, 2], [1, 2, 3, 4], [9]) == [3, 4]
    assert reply_tail([1, 2], [1, 7, 3], [9]) is None  # the template rewrote the prompt
