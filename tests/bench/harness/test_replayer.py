"""The replayer's fairness rules on a tiny model: cold baselines evict nothing warm and alternate with the
warm request, every layout gets the reference's replies, the order within a turn rotates across passes, and
render time is not TTFT."""

from __future__ import annotations

import pytest

import engine
from engine.bench.harness.replayer import Conversation, Replayer, Request
from engine.runtime.engine import Engine

SYSTEM = "You answer questions about blocks and caches. " * 8


def chat(prefix: str):
    """A conversation whose history carries its replies; `prefix` is what differs between layouts."""

    def request(t: int, replies: list[str]) -> Request:
        messages = [{"role": "system", "content": prefix + SYSTEM}]
        for i, reply in enumerate(replies):
            messages += [
                {"role": "user", "content": f"question {i}"},
                {"role": "assistant", "content": reply},
            ]
        return Request([*messages, {"role": "user", "content": f"question {t}"}])

    return request


@pytest.fixture(scope="module")
def tiny(tiny_dir):
    return engine.load(str(tiny_dir("qwen2", tokenizer=True)), device="cpu", cache_tokens=1 << 12)


def test_cold_baselines_evict_nothing_warm(tiny) -> None:
    # a pool that holds the warm conversation but not a cold copy of its last prompt beside it: the cold
    # runs (cache=False) run in a pool of their own over the same weights
    pool = tiny.with_own_pool(192)
    replayer = Replayer(pool, repeats=2, reply_tokens_max=4, cold=True)
    records = replayer.run([Conversation("a", chat("A. "), lambda t: "ok")], turns=2)
    assert records[-1].prompt_tokens + pool.cache_stats()["blocks_cached"] * 16 > 192
    assert all(r.cold_ttft_s > 0 and len(r.cold_ttft_passes_s) == 2 for r in records)
    assert pool.cache_stats()["evictions"] == 0 and records[-1].cached_tokens > 0


def test_every_layout_replays_the_reference_replies_in_rotating_order(tiny, monkeypatch) -> None:
    order: list[str] = []
    generate = tiny.generate

    def recording(*args, **kwargs):
        if kwargs.get("cache_salt"):
            order.append(kwargs["cache_salt"])
        return generate(*args, **kwargs)

    monkeypatch.setattr(tiny, "generate", recording)
    convs = [
        Conversation("ref", chat("Layout R. ")),
        Conversation("other", chat("Layout O, longer. "), replies_from="ref"),
        Conversation("third", chat("Layout T. "), replies_from="ref"),
    ]
    records = Replayer(tiny, repeats=3, reply_tokens_max=6, cold=False).run(convs, turns=2)
    by = {(r.conversation, r.turn): r for r in records}
    for t in (1, 2):
        assert by[("other", t)].reply == by[("third", t)].reply == by[("ref", t)].reply
    assert by[("other", 2)].prompt_tokens > by[("ref", 2)].prompt_tokens  # only the layout differs
    # each (pass, turn) visits the three conversations once (several calls each); the pass picks the first
    visits = [salt for i, salt in enumerate(order) if i == 0 or order[i - 1] != salt]
    assert len(visits) == 3 * 2 * 3
    assert visits[::3] == ["ref", "ref", "other", "other", "third", "third"]


def test_a_follower_listed_before_its_reference_is_refused(tiny) -> None:
    convs = [Conversation("b", chat("B. "), replies_from="a"), Conversation("a", chat("A. "))]
    with pytest.raises(ValueError, match="must come first"):
        Replayer(tiny, repeats=1, cold=False).run(convs, turns=1)


def test_render_and_tokenize_are_timed_apart_from_ttft(tiny) -> None:
    messages = [{"role": "user", "content": "how long is a block?"}]
    gen = tiny.generate(messages, max_new_tokens=1, cache=False)
    assert gen.timing.render_s > 0 and gen.timing.tokenize_s > 0
    by_ids = tiny.generate(gen.prompt_ids, max_new_tokens=1, cache=False)
    assert by_ids.timing.render_s == by_ids.timing.tokenize_s == 0.0
    text = tiny.generate("how long is a block?", max_new_tokens=1, cache=False)
    assert text.timing.render_s == 0.0 and text.timing.tokenize_s > 0


def test_cold_runs_alternate_before_and_after_the_warm_request(tiny, monkeypatch) -> None:
    calls: list[str] = []  # "cold" or "warm", per generate call after the replayer's warm-up
    real = Engine.generate

    def recording(self, *args, **kwargs):
        calls.append("cold" if kwargs.get("cache") is False else "warm")
        return real(self, *args, **kwargs)

    fresh = tiny.with_own_pool(1 << 12)  # a new Engine: Engine.generate patched below reaches it
    replayer = Replayer(fresh, repeats=4, reply_tokens_max=2, cold=True)
    monkeypatch.setattr(Engine, "generate", recording)
    records = replayer.run([Conversation("a", chat("A. "), lambda t: "ok")], turns=2)
    first, second = records
    assert first.cold_first_passes == [False, True, False, True]  # turn 1: after, before, after, before
    assert second.cold_first_passes == [True, False, True, False]
    # what ran: the two warm-ups (the warm engine's, the cold pool's), then per (pass, turn) the warm request,
    # its reply published, and the cold run
    assert calls[:2] == ["cold", "cold"]
    groups = [calls[2 + 3 * i : 5 + 3 * i] for i in range(8)]
    order = [
        first.cold_first_passes[p] if t == 0 else second.cold_first_passes[p]
        for p in range(4)
        for t in (0, 1)
    ]
    assert [g[0] == "cold" for g in groups] == order
    assert all(sorted(g) == ["cold", "warm", "warm"] for g in groups)
    assert len(replayer.passes) == 4 and all(x.wall_s > 0 and x.cpu_s > 0 for x in replayer.passes)


def test_each_finished_pass_reports_the_records_so_far(tiny) -> None:
    seen: list[tuple[int, list[int], float]] = []

    def on_pass(done: int, records: list, wall_s: float) -> None:
        seen.append((done, [r.passes for r in records], wall_s))

    convs = [Conversation("a", chat("A. "), lambda t: "ok"), Conversation("b", chat("B. "), lambda t: "ok")]
    final = Replayer(tiny, repeats=3, reply_tokens_max=2, cold=False, on_pass=on_pass).run(convs, turns=2)
    assert [(d, n) for d, n, _ in seen] == [(0, [1] * 4), (1, [2] * 4), (2, [3] * 4)]
    assert all(wall > 0 for *_, wall in seen) and [r.passes for r in final] == [3] * 4
