"""`bench cluster` at scale: N hash-id requests of generated agent traffic (FULL: 100,000; QUICK: 10,000),
about 17 blocks of 512 tokens each, written as a Mooncake JSONL file (untimed), then the whole command timed:
reading the trace, 4 routers x 3 replica counts (2, 4, 8) simulated at a quarter of the capacity that holds
every block (split among the replicas), the runs' summaries, JSON, CSV and plots. No device is used.
Target: under a minute of CPU time for 100,000 requests.
"""

from __future__ import annotations

import json
import statistics

from benchmarks.harness import Shapes, cpu_benchmark
from engine.bench.__main__ import main
from engine.traces import hash_replay
from engine.traces.mooncake import HashTrace
from engine.traces.synthetic import synthetic_hash_trace

REQUESTS_PER_SESSION = 8.5  # the generator's mean: 1-16 requests per session
ROUTERS = ["round-robin", "session", "prefix-aware", "kv-cost"]
REPLICAS = [2, 4, 8]


def test_cluster(benchmark, shapes: Shapes, tmp_path) -> None:
    wanted = shapes.hash_requests
    generated = synthetic_hash_trace(int(1.2 * wanted / REQUESTS_PER_SESSION) + 16, seed=0)
    trace = HashTrace(generated.block_size, generated.requests[:wanted])
    path = tmp_path / "traffic.jsonl"
    path.write_text(
        "".join(
            json.dumps(
                {
                    "timestamp": round(r.time_s * 1000),
                    "input_length": r.input_length,
                    "output_length": r.output_length,
                    "hash_ids": list(r.hash_ids),
                }
            )
            + "\n"
            for r in trace.requests
        )
    )
    pool = hash_replay.capacities(trace, None)[-1] // 4 // max(REPLICAS)
    argv = ["cluster", str(path), "--routers", *ROUTERS, "--replicas", *map(str, REPLICAS)]
    argv += ["--pool-tokens", str(pool), "--out", str(tmp_path / "run"), "--overwrite"]
    _, cpu_s = cpu_benchmark(benchmark, lambda: main(argv), shapes.budget_s, f"cluster {wanted} requests")
    runs = json.loads((tmp_path / "run" / "cluster.json").read_text())["runs"]
    benchmark.extra_info |= {
        "cpu_s_median": statistics.median(cpu_s),
        "cpu_s": cpu_s,
        "requests": wanted,
        "runs": len(runs),
        "hit_rates": {f"{r['router']} x{r['replicas']}": r["hit_rate"] for r in runs},
    }
    print(
        f"bench cluster: {wanted} requests x {len(runs)} runs, CPU time median {statistics.median(cpu_s):.1f} s"
    )
    assert len(runs) == len(ROUTERS) * len(REPLICAS) and all(0 < r["hit_rate"] < 1 for r in runs)
