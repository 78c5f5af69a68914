"""Hash-id (Mooncake-format) traces through the engine's `BlockManager` (`replay --analyze --pressure` on a
trace without text): N requests of generated agent traffic (FULL: 100,000; QUICK: 10,000), about 8,700
tokens (17 blocks of 512) per prompt, replayed at a quarter of the capacity that holds every block, with
LRU and with fewest-reuses eviction. The timed unit is one replay of the whole trace with one policy; the
trace is generated untimed. No device is used. Target: well under a minute for 100,000 requests on a CPU.
"""

from __future__ import annotations

import statistics

import pytest

from benchmarks.harness import Shapes, cpu_benchmark
from engine.traces import hash_replay
from engine.traces.mooncake import HashTrace
from engine.traces.pressure import POLICIES
from engine.traces.synthetic import synthetic_hash_trace

REQUESTS_PER_SESSION = 8.5  # the generator's mean: 1-16 requests per session


@pytest.mark.parametrize("policy", list(POLICIES))
def test_hash_replay(benchmark, shapes: Shapes, policy: str) -> None:
    wanted = shapes.hash_requests
    generated = synthetic_hash_trace(int(1.2 * wanted / REQUESTS_PER_SESSION) + 16, seed=0)  # 20% spare
    trace = HashTrace(generated.block_size, generated.requests[:wanted])  # the first N requests sent
    capacity = hash_replay.capacities(trace, None)[-1] // trace.block_size // 4
    group = f"hash replay {len(trace.requests)} requests"
    results, cpu_s = cpu_benchmark(
        benchmark, lambda: hash_replay.replay(trace, capacity, POLICIES[policy]), shapes.budget_s, group
    )
    served, prompt = results[-1], sum(r.input_length for r in trace.requests)
    hit_rate = sum(s.cached_tokens for s in served) / prompt
    benchmark.extra_info |= {
        "cpu_s_median": statistics.median(cpu_s),
        "cpu_s": cpu_s,
        "requests": len(trace.requests),
        "blocks_per_prompt": statistics.mean(len(r.hash_ids) for r in trace.requests),
        "capacity_blocks": capacity,
        "hit_rate": hit_rate,
    }
    print(
        f"{policy}: {len(trace.requests)} requests, CPU time per replay median {statistics.median(cpu_s):.2f} s"
    )
    assert len(served) == len(trace.requests) == wanted and 0 < hit_rate < 1
    assert sum(s.evictions for s in served) > 0  # a quarter of the capacity: under pressure
