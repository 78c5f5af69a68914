"""One small layout replay (`engine.bench.replay`): a short agent conversation in the stable-first layout and
in timestamp-first, turn by turn in one engine. The timed unit is the whole replay; the record also keeps
the last turn's cached tokens and TTFT per layout, and their TTFT ratio (stable-first over timestamp-first).

`transformers` has no prefix cache to replay against, so this case is ours only; its ratio is between layouts.
"""

from __future__ import annotations

import functools
import statistics

from benchmarks.harness import Pair, Shapes, measure
from engine.bench.harness.replayer import Conversation, Replayer, TurnRecord
from engine.bench.workloads.layouts import LAYOUTS
from engine.bench.workloads.scenario import build_scenario
from engine.runtime.engine import Engine

LAYOUT_PAIR = ("stable-first", "timestamp-first")
TURNS = 2


def test_layout_replay(benchmark, pair: Pair, shapes: Shapes) -> None:
    ours = pair.ours  # its own engine (the replay empties its cache), sharing the weights
    engine = Engine(ours.source, ours.model, ours.tokenizer, ours.device, ours.dtype, cache_tokens=16384)
    sc = build_scenario(engine.tokenizer, "small", seed=0, turns=TURNS)
    conversations = [
        Conversation(name, functools.partial(LAYOUTS[name], sc), lambda t: sc.turns[t].reply)
        for name in LAYOUT_PAIR
    ]
    replays: list[list[TurnRecord]] = []
    fn = lambda: replays.append(Replayer(engine, repeats=1, cold=False).run(conversations, TURNS))  # noqa: E731
    benchmark.group = f"layout replay ({TURNS} turns) {pair.device.type}"
    measure(benchmark, pair, fn, shapes.budget_s, case="replay", impl="ours", turns=TURNS)
    last = {
        name: [r for run in replays for r in run if r.conversation == name and r.turn == TURNS]
        for name in LAYOUT_PAIR
    }
    ttft = {name: statistics.median(r.ttft_s for r in records) for name, records in last.items()}
    benchmark.extra_info |= {
        "prompt_tokens": {name: records[0].prompt_tokens for name, records in last.items()},
        "cached_tokens": {name: records[0].cached_tokens for name, records in last.items()},
        "last_turn_ttft_s": ttft,
        "ttft_ratio": ttft[LAYOUT_PAIR[0]] / ttft[LAYOUT_PAIR[1]],
    }
    assert last[LAYOUT_PAIR[0]][0].cached_tokens > last[LAYOUT_PAIR[1]][0].cached_tokens
