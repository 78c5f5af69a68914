"""The kv-edit layout tie-in: consecutive requests of the `bench layout` scenario, the earlier one with its
scripted reply (what a cache holds when the next request comes), the later one as sent."""

from __future__ import annotations

from engine.bench.harness.replayer import reply_tokens
from engine.bench.workloads.layouts import LAYOUTS
from engine.bench.workloads.scenario import Scenario
from engine.runtime.engine import Engine

TIE_IN_LAYOUTS = ("stable-first", "timestamp-first")


def consecutive(engine: Engine, sc: Scenario, layout: str, t: int) -> tuple[list[int], list[int]]:
    """Token ids of request t-1 followed by its reply, and of request t (t >= 1), in `layout`."""
    replies = [turn.reply for turn in sc.turns]
    before, now = LAYOUTS[layout](sc, t - 1, replies), LAYOUTS[layout](sc, t, replies)
    previous = engine.render(before.messages, before.tools) + reply_tokens(engine, before, replies[t - 1])
    return previous, engine.render(now.messages, now.tools)
