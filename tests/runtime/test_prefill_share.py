"""The time-share between a long prefill and the other requests (engine/runtime/prefill_share.py), counted in
steps on a clock the test drives: each forward advances it by the tokens it computed, so a 32-token chunk
takes 32 and a decode step of one row takes 1, whatever the machine's load."""

from __future__ import annotations

import pytest

from engine.kv.block_manager import BlockManager
from engine.kv.sequence import SequenceState
from engine.runtime.request import Request, SamplingParams
from engine.runtime.scheduler import Scheduler
from tests.conftest import random_ids as tokens
from tests.precision import assert_same_greedy_run

BS = 16


def on_a_token_clock(e):  # type: ignore[no-untyped-def]
    """Make every forward advance the engine's time-share clock by its tokens; the steps' work, in order."""
    clock, steps, run = [0.0], [], e.runner.run

    def counted(work):  # type: ignore[no-untyped-def]
        steps.append([(req.id, n) for req, n in work])
        clock[0] += sum(n for _, n in work)
        return run(work)

    e.runner.run = counted
    e.share.clock = lambda: clock[0]
    return steps


def run_until(e, rid: str, limit: int = 400) -> dict:  # type: ignore[no-untyped-def]
    done = {}
    for _ in range(limit):  # bounded
        done |= {o.request_id: o.generation for o in e.step() if o.finished}
        if rid in done:
            return done
    raise AssertionError(f"{rid} not finished in {limit} steps")


def chunks_of(steps: list, rid: str) -> list[int]:
    """The indices of the steps that computed a prompt chunk of `rid`."""
    return [i for i, work in enumerate(steps) if any(r == rid and n > 1 for r, n in work)]


@pytest.mark.parametrize("arrives", ["inside the step", "after the step"])
def test_a_request_sent_during_a_chunk_is_admitted_in_the_next_step(
    tiny_dir, load, cache_tol, arrives
) -> None:
    """A request sent while a chunk of a long prompt is computed (added from inside that step, or once it is
    over, as the server's engine thread adds what arrived during a step) is admitted in the very next step,
    not after another chunk, and its whole reply comes before the long prompt's next chunk (its 12-token
    prompt and 7 decode steps take less than one 32-token chunk)."""
    e = load(tiny_dir("qwen2"), block_size=BS, cache_tokens=2048, prefill_chunk=32)
    steps = on_a_token_clock(e)
    long, short = tokens(600, 34), tokens(12, 35)
    b = e.add_request(long, max_new_tokens=2, return_logits=True)
    sent: list[str] = []
    if arrives == "inside the step":
        run = e.runner.run

        def sending(work):  # type: ignore[no-untyped-def]
            if not sent:  # the server's threads hand requests over while the engine thread steps
                sent.append(e.add_request(short, max_new_tokens=8, return_logits=True))
            return run(work)

        e.runner.run = sending
    e.step()  # the long prompt's first chunk
    if arrives == "after the step":
        sent.append(e.add_request(short, max_new_tokens=8, return_logits=True))
    a = sent[0]
    assert [o.request_id for o in e.step()] == [a]  # admitted and prefilled at once: its first token
    assert steps[1] == [(a, 12)]
    done = run_until(e, a)
    assert chunks_of(steps, b) == [0]  # no chunk of the long prompt before the reply was whole
    done |= run_until(e, b)
    assert len(chunks_of(steps, b)) == 19  # the long prompt went on to its end: 600 tokens in 32-token chunks
    for rid, prompt in ((a, short), (b, long)):
        solo = load(tiny_dir("qwen2"), block_size=BS, cache_tokens=2048).generate(
            prompt, max_new_tokens=len(done[rid].token_ids), return_logits=True
        )
        assert_same_greedy_run(done[rid].token_ids, done[rid].logits, solo.token_ids, solo.logits, cache_tol)


def test_a_long_prompt_arriving_beside_a_reply_waits_for_it(tiny_dir, load) -> None:
    """Claude Code's order: the short title request first, the long task while its prefill runs. The long
    prompt's first chunk waits while the reply decodes, for as long as that chunk is expected to take (512
    tokens at the pace of the 300-token prefill step): the reply's 19 decode steps all come first."""
    e = load(tiny_dir("qwen2"), block_size=BS, cache_tokens=8192, prefill_chunk=512)
    steps = on_a_token_clock(e)
    title = e.add_request(tokens(300, 40), max_new_tokens=20, ignore_eos=True)
    e.step()  # the title's prefill; the task arrives while it runs
    task = e.add_request(tokens(3000, 41), max_new_tokens=1)
    run_until(e, title)
    assert chunks_of(steps, task) == [] and len(steps) == 20
    assert e.share.pace_s == 1.0 and e.share.debt_s == 512 - 19
    run_until(e, task)
    assert len(chunks_of(steps, task)) == 6  # then the task alone: 3,000 tokens in chunks of 512


def test_the_long_prefill_gets_half_the_time_beside_a_long_reply(tiny_dir, load) -> None:
    """A reply that outlasts a chunk: between two chunks of the long prompt, the steps that hold it take at
    most as long as the chunk before them (plus the step that crosses the line), so the prefill advances
    every cycle; the reply decodes in every step without a chunk."""
    e = load(tiny_dir("qwen2"), block_size=BS, cache_tokens=4096, prefill_chunk=32)
    steps = on_a_token_clock(e)
    long = e.add_request(tokens(640, 50), max_new_tokens=1)
    e.step()
    reply = e.add_request(tokens(8, 51), max_new_tokens=1000, ignore_eos=True)  # outlasts the prefill
    run_until(e, long, limit=1000)  # 21 chunks, 32 held steps after each
    chunks = chunks_of(steps, long)
    assert len(chunks) == 21  # 32 tokens, then 31 beside the reply's token each: 640 in all
    for before, after in zip(chunks, chunks[1:], strict=False):
        between = sum(n for work in steps[before + 1 : after] for _, n in work)
        assert 0 < between <= sum(n for _, n in steps[before]) + 8  # the reply's prefill: 8 tokens, 1 step
        assert all(work == [(reply, 1)] for work in steps[before + 1 : after] if work != [(reply, 8)])
    e.abort(reply)


def waiting(rid: str, n: int, seed: int) -> Request:
    return Request(rid, SequenceState(tokens(n, seed)), SamplingParams(max_new_tokens=1), 0.0)


def test_a_step_that_holds_prefills_computes_only_prompts_it_computes_whole() -> None:
    """A long prompt queued first is admitted without a token computed (its client hears of its admission)
    and a short one behind it is prefilled whole; a step without the hold gives the long one its chunk,
    less one token for the request that decodes after it."""
    sched = Scheduler(BlockManager(64, 16, b"test"), max_num_seqs=8, max_num_batched_tokens=64)
    long, short = waiting("long", 200, 1), waiting("short", 40, 2)
    sched.add(long)
    sched.add(short)
    assert sched.others_have_work() and not sched.fits_a_step(long)
    step = sched.schedule(hold_prefills=True)
    assert step.work == [(short, 40)] and step.admitted == [long, short]
    assert not sched.waiting and long.seq.num_kv == 0  # admitted with none of its prompt computed
    short.seq.num_kv = 40  # its prompt computed, its first token sampled: it decodes
    short.seq.token_ids.append(7)
    step = sched.schedule()
    assert step.work == [(long, 63), (short, 1)]  # one token of the budget left for it
