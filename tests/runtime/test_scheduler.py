"""Many sequences at once: every request of a batch gets what it would get alone (greedy tokens, logits within
the cached-vs-cold tolerance, seeded samples, stop strings), with shared prefixes, different lengths, chunked
prefill beside decoding, preemption under a small pool, and aborts."""

from __future__ import annotations

import pytest

from engine.errors import CacheCapacityError, InvalidArgumentError
from engine.kv.block_manager import BlockManager
from engine.kv.sequence import SequenceState
from engine.runtime.request import Request, SamplingParams, Status
from engine.runtime.scheduler import Scheduler
from tests.conftest import random_ids as tokens
from tests.precision import assert_same_greedy_run

BS = 16


def solo(load, model_dir, prompts, **options):
    """Each prompt alone on a fresh engine (nothing cached, nothing else running): the reference."""
    out = []
    for prompt in prompts:
        e = load(model_dir, block_size=BS, cache_tokens=1024)
        out.append(e.generate(prompt, return_logits=True, **options))
    return out


def assert_same(got, ref, tol) -> None:
    for g, r in zip(got, ref, strict=True):
        assert_same_greedy_run(g.token_ids, g.logits, r.token_ids, r.logits, tol)
        assert g.finish_reason == r.finish_reason and g.text == r.text


def test_a_batch_equals_its_requests_run_alone(tiny_dir, load, cache_tol) -> None:
    shared = tokens(40, 0)
    prompts = [shared + tokens(9, 1), shared + tokens(30, 2), tokens(23, 3), shared[:17]]
    e = load(tiny_dir("qwen2"), block_size=BS, cache_tokens=1024)
    got = e.generate_many(prompts, max_new_tokens=12, return_logits=True)
    assert_same(got, solo(load, tiny_dir("qwen2"), prompts, max_new_tokens=12), cache_tol)
    assert [len(g.token_ids) for g in got] == [12] * 4
    assert not e.has_unfinished() and e.cache_stats()["blocks_in_use"] == 0


def test_different_lengths_limits_and_seeds(tiny_dir, load, cache_tol) -> None:
    prompts = [tokens(n, 10 + n) for n in (5, 60, 33)]
    limits, seeds = [3, 17, 9], [7, 8, 9]
    e = load(tiny_dir("qwen2"), block_size=BS, cache_tokens=1024)
    ids = [
        e.add_request(p, max_new_tokens=m, temperature=0.9, top_p=0.95, seed=s, return_logits=True)
        for p, m, s in zip(prompts, limits, seeds, strict=True)
    ]
    done = {}
    for _ in range(100):  # bounded: 17 tokens need at most 18 steps
        done |= {o.request_id: o.generation for o in e.step() if o.finished}
        if len(done) == 3:
            break
    for rid, prompt, m, s in zip(ids, prompts, limits, seeds, strict=True):
        alone = load(tiny_dir("qwen2"), block_size=BS, cache_tokens=1024).generate(
            prompt, max_new_tokens=m, temperature=0.9, top_p=0.95, seed=s, return_logits=True
        )
        assert done[rid].token_ids == alone.token_ids
        assert (done[rid].logits - alone.logits).abs().max().item() <= cache_tol


def test_stop_strings_and_eos_in_a_batch(smollm2) -> None:
    questions = ["What is the capital of France?", "Name three colours.", "Count from one to ten."]
    prompts = [[{"role": "user", "content": q}] for q in questions]
    stop = ["Paris", "blue", "five"]
    alone = [smollm2.generate(p, max_new_tokens=40, stop=stop, cache=False) for p in prompts]
    together = smollm2.generate_many(prompts, max_new_tokens=40, stop=stop)
    for a, t in zip(alone, together, strict=True):
        assert (t.token_ids, t.text, t.finish_reason, t.stop_string) == (
            a.token_ids,
            a.text,
            a.finish_reason,
            a.stop_string,
        )
    assert any(t.stop_string for t in together)


def test_a_prefix_published_in_flight_serves_the_next_request(tiny_dir, load) -> None:
    e = load(tiny_dir("qwen2"), block_size=BS, cache_tokens=1024)
    shared = tokens(64, 20)
    first = e.add_request(shared + [5], max_new_tokens=8)
    e.step()  # the first request's prompt is computed and its 4 full blocks published; it keeps decoding
    second = e.add_request(shared + [6, 7], max_new_tokens=2)
    done = {}
    while e.has_unfinished():
        done |= {o.request_id: o.generation for o in e.step() if o.finished}
    assert done[second].usage.cached_tokens == 64 and done[first].usage.cached_tokens == 0


def test_the_steps_that_admit_a_request_and_publish_its_blocks_are_noted(tiny_dir, load) -> None:
    """Two requests sharing 64 tokens admitted in one step read nothing of each other (`CacheSteps`: the same
    step, their prompts' blocks published after it, the first one's reply blocks after later steps); a third
    admitted after that step reads their blocks."""
    e = load(tiny_dir("qwen2"), block_size=BS, cache_tokens=1024)
    shared = tokens(64, 21)
    first, second = (e.add_request(shared + [n], max_new_tokens=n, ignore_eos=True) for n in (20, 2))
    e.step()
    third = e.add_request(shared + [7, 8], max_new_tokens=1)
    done = {}
    while e.has_unfinished():
        done |= {o.request_id: o.generation for o in e.step() if o.finished}
    a, b, c = (done[r].steps for r in (first, second, third))
    assert a.admitted == b.admitted == 1 and c.admitted == 2 == e.steps - 18
    assert [done[r].usage.cached_tokens for r in (first, second, third)] == [0, 0, 64]
    assert b.published == [(1, 64)] and a.published == [(1, 64), (16, 80)]  # 65 + 15 tokens through step 16
    assert c.published == []  # its prompt adds no full block to the cached 64


def test_a_long_prompt_is_prefilled_in_chunks_beside_decoding(tiny_dir, load, cache_tol) -> None:
    e = load(tiny_dir("qwen2"), block_size=BS, cache_tokens=1024, prefill_chunk=24)
    short, long = tokens(10, 30), tokens(100, 31)
    a = e.add_request(short, max_new_tokens=10, return_logits=True)
    e.step()  # a: prefill and its first token
    b = e.add_request(long, max_new_tokens=3, return_logits=True)
    tokens_per_step = []
    done = {}
    while e.has_unfinished():
        outs = e.step()
        tokens_per_step.append(sum(1 for o in outs if o.request_id == a))
        done |= {o.request_id: o.generation for o in outs if o.finished}
    # a decodes a token in every step while b's 100-token prompt takes 5 chunked steps (23 + 24 ... tokens)
    assert tokens_per_step[:5] == [1] * 5
    ref = solo(load, tiny_dir("qwen2"), [short, long], max_new_tokens=10)
    assert_same_greedy_run(done[a].token_ids, done[a].logits, ref[0].token_ids, ref[0].logits, cache_tol)
    assert_same_greedy_run(
        done[b].token_ids, done[b].logits, ref[1].token_ids[:3], ref[1].logits[:3], cache_tol
    )


def test_a_short_request_decodes_at_its_pace_while_a_long_prefill_runs(tiny_dir, load, cache_tol) -> None:
    # the long prompt is admitted first and computes a chunk per step; the short one, sent beside it, is
    # admitted at once and decodes in the steps between the chunks (which hold the long prefill)
    e = load(tiny_dir("qwen2"), block_size=BS, cache_tokens=1024, prefill_chunk=32)
    long, short = tokens(600, 32), tokens(12, 33)
    b = e.add_request(long, max_new_tokens=2, return_logits=True)
    e.step()  # the long prompt's first chunk
    a = e.add_request(short, max_new_tokens=8, return_logits=True)
    done, order, steps = {}, [], 0
    while e.has_unfinished() and steps < 200:  # bounded: 19 chunks and 10 tokens
        steps += 1
        outs = e.step()
        order += [o.request_id for o in outs]
        done |= {o.request_id: o.generation for o in outs if o.finished}
    assert order[:8] == [a] * 8  # the short reply was done before the long prompt's first token
    assert done[b].usage.prompt_tokens == 600 and len(done[a].token_ids) == 8
    ref = solo(load, tiny_dir("qwen2"), [short, long], max_new_tokens=8)
    assert_same_greedy_run(done[a].token_ids, done[a].logits, ref[0].token_ids, ref[0].logits, cache_tol)
    assert_same_greedy_run(
        done[b].token_ids, done[b].logits, ref[1].token_ids[:2], ref[1].logits[:2], cache_tol
    )


def test_preemption_under_a_small_pool_keeps_every_result(tiny_dir, load, cache_tol) -> None:
    prompts = [tokens(40, 40 + i) for i in range(4)]
    small = load(tiny_dir("qwen2"), block_size=BS, cache_tokens=10 * BS)  # room for about two at a time
    got = small.generate_many(prompts, max_new_tokens=30, return_logits=True)
    assert sum(g.preemptions for g in got) > 0
    assert_same(got, solo(load, tiny_dir("qwen2"), prompts, max_new_tokens=30), cache_tol)
    assert small.cache_stats()["blocks_in_use"] == 0


def test_abort_releases_the_blocks_and_the_rest_go_on(tiny_dir, load, cache_tol) -> None:
    e = load(tiny_dir("qwen2"), block_size=BS, cache_tokens=1024)
    keep, drop = tokens(30, 50), tokens(50, 51)
    k = e.add_request(keep, max_new_tokens=6, return_logits=True)
    d = e.add_request(drop, max_new_tokens=50)
    e.step()
    held = e.cache_stats()["blocks_in_use"]
    assert e.abort(d) and not e.abort(d) and e.cache_stats()["blocks_in_use"] < held
    done = {}
    while e.has_unfinished():
        done |= {o.request_id: o.generation for o in e.step() if o.finished}
    assert list(done) == [k]
    ref = solo(load, tiny_dir("qwen2"), [keep], max_new_tokens=6)[0]
    assert_same_greedy_run(done[k].token_ids, done[k].logits, ref.token_ids, ref.logits, cache_tol)
    assert e.cache_stats()["blocks_in_use"] == 0


def test_timings_of_a_batched_request(tiny_dir, load) -> None:
    e = load(tiny_dir("qwen2"), block_size=BS, cache_tokens=1024)
    g = e.generate_many([tokens(20, 60), tokens(25, 61)], max_new_tokens=5)[1]
    t = g.timing
    assert 0 <= t.queue_s < t.ttft_s and 0 < t.prefill_s < t.ttft_s
    assert len(t.inter_token_s) == 4 and abs(sum(t.inter_token_s) - t.decode_s) < 1e-9
    assert t.time_per_output_token_s == pytest.approx(t.decode_s / 4)


def test_what_could_never_fit_is_refused_at_submission(tiny_dir, load) -> None:
    small = load(tiny_dir("qwen2"), block_size=BS, cache_tokens=4 * BS)
    with pytest.raises(CacheCapacityError, match="request needs 5 KV blocks"):
        small.add_request(tokens(70, 70), max_new_tokens=10)
    assert not small.has_unfinished()
    rid = small.add_request(tokens(20, 71), max_new_tokens=3, request_id="mine")
    with pytest.raises(InvalidArgumentError, match="already in flight"):
        small.add_request(tokens(20, 72), request_id="mine")
    with pytest.raises(InvalidArgumentError, match="needs an idle engine"):
        small.generate(tokens(20, 73))
    assert small.abort(rid)


def test_on_admitted_fires_once_per_request_before_its_first_forward(tiny_dir, load) -> None:
    """The admission hook: each request once, at its first admission (cached tokens known then), before the
    step's forward computes anything; never again when preempted and readmitted."""
    e = load(tiny_dir("qwen2"), block_size=BS, cache_tokens=160)  # 10 blocks: the three preempt each other
    first = e.generate(tokens(48, 60), max_new_tokens=1)  # leaves 3 cached blocks
    seen: list[tuple[str, int, int]] = []  # (request id, cached tokens, forwards run before it)
    forwards = []
    run = e.runner.run
    e.runner.run = lambda work: forwards.append(1) or run(work)
    e.on_admitted = lambda rid, cached: seen.append((rid, cached, len(forwards)))
    ids = [e.add_request(tokens(48, 60) + tokens(8, 61 + i), max_new_tokens=40) for i in range(3)]
    done = {}
    for _ in range(400):  # bounded
        done |= {o.request_id: o.generation for o in e.step() if o.finished}
        if len(done) == 3:
            break
    assert len(done) == 3 and first.usage.cached_tokens == 0
    assert sum(g.preemptions for g in done.values()) > 0  # readmissions happened, and were not reported
    assert [rid for rid, _, _ in seen] == ids
    assert seen[0] == (ids[0], 48, 0)  # admitted in the first step, before its forward
    assert all(cached == done[rid].usage.cached_tokens for rid, cached, _ in seen)


def running_request(sched: Scheduler, rid: str, num_kv: int, prefilled: bool = False) -> Request:
    """A running request with K/V for its first `num_kv` tokens and one token pending."""
    seq = SequenceState(tokens(num_kv + 1, len(rid)))
    seq.num_kv = num_kv
    sched.blocks.grow(seq, num_kv)
    req = Request(rid, seq, SamplingParams(), 0.0, prefilled=prefilled, status=Status.RUNNING)
    sched.running.append(req)
    return req


def test_preemption_never_takes_a_request_already_in_the_step() -> None:
    """A prefilled request at the end of `running` needs a block when none is free: the requests before it are
    in the step's work already, so none of them is preempted (one would run with an empty block table while
    another took its block); it waits, and no one is admitted in its place. With a recomputable request after
    it, that one goes instead."""
    sched = Scheduler(BlockManager(4, 4, b"test"), max_num_seqs=8, max_num_batched_tokens=64)
    a, b = running_request(sched, "a", 2), running_request(sched, "bb", 2)
    p = running_request(sched, "ppp", 8, prefilled=True)  # its 9th token needs a 5th block
    sched.add(Request("w", SequenceState(tokens(3, 9)), SamplingParams(max_new_tokens=1), 0.0))
    step = sched.schedule()
    assert step.work == [(a, 1), (b, 1)] and not step.preempted and not step.admitted
    assert sched.running == [a, b, p] and all(r.seq.block_table for r in (a, b, p))
    sched.finish(b)  # its block goes to c, admitted after p: the one that can go
    c = running_request(sched, "cccc", 3)
    step = sched.schedule()
    assert step.work == [(a, 1), (p, 1)] and step.preempted == [c]
    assert len(p.seq.block_table) == 3 and not c.seq.block_table


def test_a_forced_reply_runs_every_decode_step_and_caches_like_a_sampled_one(
    tiny_dir, load, cache_tol
) -> None:
    """A scripted reply's tokens replace the sampled ones step by step: the request ends at its last token (or
    EOS), its logits are those a teacher-forced prefill gives, and its K/V serve the next turn."""
    e = load(tiny_dir("qwen2"), block_size=BS, cache_tokens=1024)
    prompt, script = tokens(40, 80), tokens(30, 81)
    got = e.generate(prompt, max_new_tokens=100, forced=script, return_logits=True)
    assert got.token_ids == script and got.finish_reason == "stop" and len(got.logits) == 30
    assert got.timing.decode_s > 0 and len(got.timing.inter_token_s) == 29  # 29 real decode steps
    ref = load(tiny_dir("qwen2"), block_size=BS, cache_tokens=1024)
    last = ref.generate(prompt + script[:-1], max_new_tokens=1, return_logits=True, cache=False)
    assert (got.logits[-1] - last.logits[0]).abs().max().item() <= cache_tol
    follow = e.generate(prompt + script + tokens(5, 82), max_new_tokens=1)
    assert follow.usage.cached_tokens == (len(prompt) + len(script) - 1) // BS * BS
    assert e.generate(prompt, max_new_tokens=3, forced=script).token_ids == script[:3]  # the limit holds
    with pytest.raises(InvalidArgumentError, match="at least one token"):
        e.add_request(prompt, forced=[])
