"""A fleet of agents through one engine: each agent replays its conversation turn by turn, all of them at
once, and the engine batches whatever is in flight.

Agent a sends turn t + 1 only after its reply to turn t has ended, plus a think time: exponential with mean
agents / rate, so that the fleet offers about `rate` requests per second while it keeps up (open loop,
first turns at Poisson arrivals), or none at all (`rate` None: closed loop, every agent at once). Every
request decodes exactly `reply_tokens` tokens (EOS ignored) and the next turn carries the scenario's scripted
reply, so the arms of a comparison send the same tokens in the same pattern and differ only in layout.

TTFT is measured from the request's scheduled arrival (not from when the driver got to add it, between two
engine steps), so a request that arrives while a step runs waits, as it would at a server. Prompts are
rendered before the run: nothing but the engine runs inside the clock. Each run records the machine's load
while it ran (`engine.bench.harness.contention`; the sleeps until the next arrival count as idle, not as
waiting for cores) and its position among the arms of its repeat.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from engine.bench.harness.contention import PassLoad, start_pass
from engine.runtime.engine import Engine


@dataclass
class FleetRequest:
    agent: int
    turn: int
    arrival_s: float  # scheduled, from the run's start
    prompt_tokens: int
    cached_tokens: int
    output_tokens: int
    ttft_s: float  # scheduled arrival -> first token
    queue_s: float  # scheduled arrival -> admission
    tpot_s: float  # time per output token after the first
    end_s: float  # last token, from the run's start
    preemptions: int


@dataclass
class FleetRun:
    arm: str
    rate: float | None  # offered requests per second (None: closed loop)
    repeat: int
    makespan_s: float
    requests: list[FleetRequest] = field(default_factory=list)
    occupancy: list[tuple[float, int, int]] = field(default_factory=list)  # (t, blocks in use, cached)
    position: int = 0  # where this run came among the arms of its rate and repeat (0: first)
    load: PassLoad | None = None  # the machine's load while it ran (set when it ends)


def run_fleet(
    engine: Engine,
    prompts: list[list[list[int]]],
    arm: str,
    rate: float | None,
    reply_tokens: int,
    seed: int,
    repeat: int = 0,
    on_request: Callable[[], None] | None = None,
    position: int = 0,
) -> FleetRun:
    """Replay `prompts[agent][turn]` (token ids) as a fleet, on an engine whose cache was just emptied."""
    rng = random.Random(seed)
    agents, turns = len(prompts), len(prompts[0])
    mean_think = 0.0 if rate is None else agents / rate
    ready = [0.0] * agents
    if rate is not None:  # first turns at the arrivals of a Poisson process of `rate` per second
        clock = 0.0
        for a in range(agents):
            clock += rng.expovariate(rate)
            ready[a] = clock
    next_turn = [0] * agents
    flying: dict[str, tuple[int, int, float, float]] = {}  # rid -> (agent, turn, scheduled, added)
    run = FleetRun(arm, rate, repeat, 0.0, position=position)
    finish, idle_s = start_pass(engine.device), 0.0
    start = time.perf_counter()
    while any(t < turns for t in next_turn) or flying:
        now = time.perf_counter() - start
        for a in range(agents):
            busy = any(f[0] == a for f in flying.values())
            if not busy and next_turn[a] < turns and ready[a] <= now:
                rid = engine.add_request(
                    prompts[a][next_turn[a]], max_new_tokens=reply_tokens, ignore_eos=True
                )
                flying[rid] = (a, next_turn[a], ready[a], time.perf_counter() - start)
        if not engine.has_unfinished():  # nothing to run until the next agent is ready
            wait = max(0.0, min(r for a, r in enumerate(ready) if next_turn[a] < turns) - now)
            time.sleep(wait)
            idle_s += wait
            continue
        for out in engine.step():
            if out.error is not None:
                raise out.error
            if out.generation is None:
                continue
            a, t, scheduled, added = flying.pop(out.request_id)
            g, end = out.generation, time.perf_counter() - start
            late = added - scheduled  # waited for the step that was running when it arrived
            run.requests.append(
                FleetRequest(
                    a,
                    t + 1,
                    scheduled,
                    g.usage.prompt_tokens,
                    g.usage.cached_tokens,
                    g.usage.completion_tokens,
                    late + g.timing.ttft_s,
                    late + g.timing.queue_s,
                    g.timing.time_per_output_token_s,
                    end,
                    g.preemptions,
                )
            )
            next_turn[a] += 1
            ready[a] = end + (rng.expovariate(1 / mean_think) if mean_think else 0.0)
            if on_request is not None:
                on_request()
        stats = engine.cache_stats()
        run.occupancy.append((time.perf_counter() - start, stats["blocks_in_use"], stats["blocks_cached"]))
    run.makespan_s = time.perf_counter() - start
    run.load = finish(idle_s)  # think time is not waiting for cores
    return run
