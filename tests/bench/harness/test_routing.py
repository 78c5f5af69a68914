"""The routers in front of live servers (`LiveRouter`): what each replica looks like to them (requests in
flight, blocks held, the prompts sent there) as requests are picked and answered, on SmolLM2's tokenizer
and chat template."""

from __future__ import annotations

import pytest

from engine.bench.harness.routing import LiveRouter
from engine.errors import InvalidArgumentError
from engine.loading.sources import resolve
from engine.runtime.loader import with_tokenizer
from engine.traces.rendering import TraceRenderer
from engine.traces.request import TraceRequest

SYSTEM = {"role": "system", "content": "You answer questions about trains, briefly. " * 8}


@pytest.fixture(scope="module")
def renderer() -> TraceRenderer:
    source, tokenizer = with_tokenizer(resolve("smollm2-135m", 0))
    assert tokenizer is not None
    return TraceRenderer(tokenizer, source.eos_ids)


def requests(*questions: str) -> list[TraceRequest]:
    return [
        TraceRequest([SYSTEM, {"role": "user", "content": q}], session=f"s{i}")
        for i, q in enumerate(questions)
    ]


def router(name: str, renderer: TraceRenderer, reqs: list[TraceRequest], blocks: int = 4096) -> LiveRouter:
    return LiveRouter(name, reqs, renderer, 2, blocks, 16, max_tokens=8, seed=0)


def test_load_is_what_was_sent_and_not_answered(renderer) -> None:
    r = router("least-loaded", renderer, requests("a?", "b?", "c?"))
    first = r.pick(0)
    assert r.replicas[first].in_flight == 1 and r.replicas[first].active_blocks > 0
    second = r.pick(1)  # the first is still in flight: the other replica
    assert second != first
    r.answered(0)
    assert r.replicas[first].in_flight == 0 and r.replicas[first].active_blocks == 0
    assert r.replicas[first].prefill_tokens == 0
    assert r.pick(2) == first and r.placement == {0: first, 1: second, 2: first}


def test_kv_cost_goes_where_the_prefix_was_sent(renderer) -> None:
    r = router("kv-cost", renderer, requests("Which line is fastest?", "Which line is oldest?"))
    first = r.pick(0)
    r.answered(0)
    assert r.replicas[first].overlap(r.requests[1]) > 0 == r.replicas[1 - first].overlap(r.requests[1])
    assert r.pick(1) == first


def test_round_robin_alternates(renderer) -> None:
    r = router("round-robin", renderer, requests("a?", "b?", "c?", "d?"))
    assert [r.pick(i) for i in range(4)] == [0, 1, 0, 1]


def test_a_prompt_over_the_predicted_cache_is_refused(renderer) -> None:
    with pytest.raises(InvalidArgumentError, match="give --cache-tokens at least"):
        router("round-robin", renderer, requests("a?"), blocks=2)
