"""`python -m engine.bench fleet` on a tiny model: every request of every arm and load recorded, the shared
system prompt served from the cache across agents, the report and plots written."""

from __future__ import annotations

import csv
import json

from engine.bench.__main__ import main
from engine.bench.harness.fleet import run_fleet
from engine.runtime.loader import load


def test_fleet_runs_every_arm_and_load(tiny_dir, tmp_path) -> None:
    out = tmp_path / "fleet"
    model = str(tiny_dir("qwen2", tokenizer=True))
    args = ["fleet", "--model", model, "--agents", "3", "--turns", "2", "--rates", "50", "--out", str(out)]
    assert main(args) == 0
    for name in (
        "fleet.json",
        "requests.csv",
        "summary.csv",
        "report.md",
        "ttft_vs_rate.png",
        "pool_occupancy.png",
    ):
        assert (out / name).stat().st_size > 0, name
    rows = list(csv.DictReader((out / "requests.csv").open()))
    assert len(rows) == 2 * 2 * 3 * 2  # arms x loads (50 req/s and the closed loop) x agents x turns
    summary = {(r["arm"], r["rate"]): r for r in csv.DictReader((out / "summary.csv").open())}
    stable, stamped = summary[("stable-first", "closed loop")], summary[("timestamp-first", "closed loop")]
    assert float(stable["cached_share"]) > float(stamped["cached_share"])
    assert all(float(r["ttft_s"]) > 0 and int(r["output_tokens"]) == 16 for r in rows)
    env = json.loads((out / "fleet.json").read_text())["environment"]
    assert env["options"]["agents"] == 3 and env["full_prefill_rate"] > 0
    report = (out / "report.md").read_text()
    assert "timestamp-first` / `stable-first`, p50 TTFT at closed loop" in report
    assert "over n = 1 repeats" in report and "too few repeats" in report and "Contention:" in report
    runs = json.loads((out / "fleet.json").read_text())["runs"]
    assert sorted(r["position"] for r in runs) == [0, 0, 1, 1] and all(r["load"]["wall_s"] > 0 for r in runs)
    for r in runs:  # each run also as `vllm bench serve --save-result` writes one
        rate = "closed" if r["rate"] is None else f"{r['rate']:g}rps"
        name = f"{r['arm']}-{rate}-repeat{r['repeat']}.json"
        vllm = json.loads((out / "vllm_bench_serve" / name).read_text())
        assert vllm["completed"] == len(r["requests"]) == 6 and vllm["failed"] == 0
        assert vllm["total_input_tokens"] == sum(q["prompt_tokens"] for q in r["requests"])
        assert vllm["ttfts"] == [q["ttft_s"] for q in r["requests"]] and vllm["mean_itl_ms"] is None


def test_overwriting_says_which_files_of_the_last_run_it_kept(tiny_dir, tmp_path, capsys) -> None:
    """Another rate writes other `vllm_bench_serve` files: the older run's stay, and the run's last lines say so."""
    out = tmp_path / "fleet"
    model = str(tiny_dir("qwen2", tokenizer=True))
    args = [
        "fleet",
        "--model",
        model,
        "--agents",
        "2",
        "--turns",
        "1",
        "--layouts",
        "stable-first",
        "--out",
        str(out),
    ]
    assert main([*args, "--rates", "50"]) == 0
    capsys.readouterr()
    assert main([*args, "--rates", "60", "--overwrite"]) == 0
    said = capsys.readouterr().err
    assert "--overwrite: replaced" in said and "kept vllm_bench_serve/stable-first-50rps-repeat0.json" in said


def test_agents_share_the_system_prompt_and_wait_for_their_replies(tiny_dir) -> None:
    e = load(str(tiny_dir("qwen2", tokenizer=True)), device="cpu", cache_tokens=4096)
    shared = list(range(10, 74))  # 4 full blocks every agent starts with
    prompts = [[shared + [100 + a] * 5, shared + [100 + a] * 5 + [7] * 20] for a in range(3)]
    run = run_fleet(e, prompts, "arm", None, reply_tokens=4, seed=0)
    assert len(run.requests) == 6 and run.makespan_s > 0 and run.occupancy
    first_turns = sorted((r for r in run.requests if r.turn == 1), key=lambda r: r.agent)
    assert first_turns[0].cached_tokens == 0  # all three arrive at once: nobody has published yet
    second = {r.agent: r for r in run.requests if r.turn == 2}
    for a, r in second.items():  # a second turn comes after its agent's first reply ended
        assert r.arrival_s >= next(f.end_s for f in first_turns if f.agent == a)
        assert r.cached_tokens >= 64


def test_think_time_counts_as_idle_not_as_waiting_for_cores(tiny_dir) -> None:
    e = load(str(tiny_dir("qwen2", tokenizer=True)), device="cpu", cache_tokens=4096)
    prompts = [[[10 + a] * 20] for a in range(3)]
    closed = run_fleet(e, prompts, "arm", None, reply_tokens=2, seed=0)
    assert closed.load is not None and closed.load.idle_s == 0.0
    e.reset_cache()
    sparse = run_fleet(e, prompts, "arm", 4.0, reply_tokens=2, seed=0)  # arrivals ~0.25 s apart
    assert sparse.load is not None and 0.0 < sparse.load.idle_s < sparse.load.wall_s
    assert "CPU-s per s" not in sparse.load.why  # the sleeps are not starvation
