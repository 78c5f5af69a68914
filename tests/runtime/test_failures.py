"""A request's failure is its own: sampling arguments at the edge of float32, a forward or logits that fail
for one request of a batch, and misuse of the Python API (unknown ids, bad prompts among good ones, calls
from several threads) leave the other requests and the engine as they were."""

from __future__ import annotations

import threading

import pytest
import torch

from engine.errors import InvalidArgumentError, NumericalError, PromptError
from engine.runtime.runner import ModelRunner
from tests.conftest import random_ids as tokens


def test_tiny_temperatures_and_top_p_sample_greedily(eng) -> None:
    prompt = tokens(20, 1)
    greedy = eng.generate(prompt, max_new_tokens=6).token_ids
    for temperature, top_p in ((1e-300, 1.0), (1e-6, 0.5), (1.0, 1e-45), (0.7, 1e-300)):
        gen = eng.generate(prompt, max_new_tokens=6, temperature=temperature, top_p=top_p, seed=3)
        assert gen.token_ids == greedy, (temperature, top_p)


def fail_for(monkeypatch, bad_first_token: int, where: str) -> None:
    """Make the forward of any batch holding the request whose prompt starts with `bad_first_token` raise
    (`where` = "forward"), or that request's logits NaN ("logits")."""
    run = ModelRunner.run

    def patched(self, work):
        bad = [i for i, (req, _) in enumerate(work) if req.seq.token_ids[0] == bad_first_token]
        if bad and where == "forward":
            raise RuntimeError("this request breaks the forward")
        sampling, logits = run(self, work)
        logits = logits.clone()  # an inference tensor cannot be written outside inference mode
        for row, req in enumerate(sampling):
            if req.seq.token_ids[0] == bad_first_token:
                logits[row] = float("nan")
        return sampling, logits

    monkeypatch.setattr(ModelRunner, "run", patched)


@pytest.mark.parametrize("where", ["forward", "logits"])
def test_one_failing_request_fails_alone_and_the_engine_goes_on(eng, monkeypatch, where: str) -> None:
    good = [[7, *tokens(20, 2)], [8, *tokens(30, 3)]]
    alone = [eng.generate(p, max_new_tokens=5, cache=False).token_ids for p in good]
    fail_for(monkeypatch, 9, where)
    ids = [eng.add_request(p, max_new_tokens=5) for p in (good[0], [9, *tokens(25, 4)], good[1])]
    errors, done = {}, {}
    for _ in range(20):
        for out in eng.step():
            if out.error is not None:
                errors[out.request_id] = out.error
            elif out.generation is not None:
                done[out.request_id] = out.generation.token_ids
        if not eng.has_unfinished():
            break
    assert list(errors) == [ids[1]]
    expected = RuntimeError if where == "forward" else NumericalError
    assert isinstance(errors[ids[1]], expected)
    assert [done[ids[0]], done[ids[2]]] == alone
    assert eng.cache_stats()["blocks_in_use"] == 0
    with pytest.raises(expected):  # the Python API raises the request's own error ...
        eng.generate([9, 1, 2], max_new_tokens=3)
    assert eng.generate(good[0], max_new_tokens=5).token_ids == alone[0]  # ... and stays usable


def test_an_aborted_request_after_a_failed_step_leaves_a_working_engine(eng, monkeypatch) -> None:
    """The crash that was: a step failing after the forward left a request with nothing to compute, and
    the next step ran attention over zero tokens (SIGFPE). Now every request either gets its token or is
    failed."""
    calls = {"n": 0}
    from engine.runtime import request as request_module

    accept = request_module.Request.accept

    def flaky(self, *args):
        calls["n"] += 1
        if calls["n"] == 2:
            raise ValueError("detokenizer broke")
        return accept(self, *args)

    monkeypatch.setattr(request_module.Request, "accept", flaky)
    a = eng.add_request(tokens(10, 5), max_new_tokens=4)
    b = eng.add_request(tokens(12, 6), max_new_tokens=4)
    outs = eng.step()
    assert [o.request_id for o in outs if o.error is not None] == [b]
    eng.abort(b)
    while eng.has_unfinished():
        eng.step()
    assert not eng.abort(a) and eng.generate(tokens(10, 5), max_new_tokens=2).finish_reason == "length"


def test_unknown_request_ids_raise(eng) -> None:
    with pytest.raises(InvalidArgumentError, match="no request 'no-such-id' is in flight"):
        eng.run_to_end("no-such-id")
    assert eng.abort("no-such-id") is False


def test_generate_many_checks_every_prompt_before_running_any(eng) -> None:
    good = tokens(12, 7)
    with pytest.raises(PromptError):
        eng.generate_many([good, 5, good], max_new_tokens=2)
    assert not eng.has_unfinished() and eng.cache_stats()["blocks_in_use"] == 0
    with pytest.raises(InvalidArgumentError, match="already in flight"):
        eng.generate_many([good, good], max_new_tokens=2, request_id="same")
    assert not eng.has_unfinished()
    assert len(eng.generate_many([good, good], max_new_tokens=2)) == 2


def test_calls_from_several_threads_take_turns(eng) -> None:
    prompts = [tokens(15 + i, 10 + i) for i in range(6)]
    alone = [eng.generate(p, max_new_tokens=4, cache=False).token_ids for p in prompts]
    results: dict[int, list[int]] = {}
    failures: list[BaseException] = []

    def call(i: int) -> None:
        try:
            results[i] = eng.generate(prompts[i], max_new_tokens=4).token_ids
        except BaseException as e:  # noqa: BLE001 - reported below
            failures.append(e)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not failures and [results[i] for i in range(6)] == alone
    assert not eng.has_unfinished()


def test_sample_rows_reports_a_non_finite_row_alone() -> None:
    from engine.model.sampling import sample_rows

    logits = torch.tensor([[0.0, 1.0, 0.5], [float("nan"), 0.0, 0.0], [2.0, 0.0, float("inf")]])
    assert sample_rows(logits, [(0.0, 1.0, None)] * 3) == [1, None, None]


def test_a_prefilled_request_ended_by_its_first_token_runs_to_its_end(eng) -> None:
    from engine.approx.assembly import Compute, generate

    ids = tokens(12, 8)
    gen = generate(eng, ids, [Compute(len(ids))], max_new_tokens=1)
    assert len(gen.token_ids) == 1 and gen.finish_reason == "length"
    assert gen.token_ids == eng.generate(ids, max_new_tokens=1).token_ids and not eng.has_unfinished()
