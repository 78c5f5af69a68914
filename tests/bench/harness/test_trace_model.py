"""The model an analysis renders a trace with: the smallest long-context preset that holds its longest
request, found by rendering the request with the most text."""

from __future__ import annotations

from engine.bench.harness.trace_model import fitting_model, hint, longest_prompt
from engine.loading.sources import resolve
from engine.runtime.loader import with_tokenizer
from engine.traces.request import TraceRequest


def test_the_smallest_preset_that_holds_it() -> None:
    assert fitting_model(9_000) == "synthetic:qwen2.5-0.5b"
    assert fitting_model(32_769) == "synthetic:qwen2.5-0.5b-128k"
    assert fitting_model(500_000) == "synthetic:qwen2.5-0.5b-128k"  # none holds it: the largest
    assert hint(40_000).startswith("--model synthetic:qwen2.5-0.5b-128k holds 40,000 tokens")


def test_the_longest_request_rendered_with_the_model() -> None:
    source, tokenizer = with_tokenizer(resolve("synthetic:qwen2.5-0.5b", 0))
    short = TraceRequest([{"role": "user", "content": "hi"}])
    long = TraceRequest([{"role": "user", "content": "word " * 3000}])
    got = longest_prompt(tokenizer, source.eos_ids, [short, long, TraceRequest([])])
    assert 3000 <= got < 3100 and longest_prompt(tokenizer, source.eos_ids, [TraceRequest([])]) == 0
