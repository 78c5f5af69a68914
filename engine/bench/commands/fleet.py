"""`python -m engine.bench fleet`: the run (its description and flags: engine/bench/flags/fleet.py)."""

from __future__ import annotations

import argparse

from tqdm import tqdm

from engine.bench.args import open_engine
from engine.bench.harness.contention import contention_note
from engine.bench.harness.fleet import FleetRun, run_fleet
from engine.bench.reporting.fleet_report import (
    COLUMNS,
    paired_ttft,
    plot_occupancy,
    plot_ttft_vs_rate,
    summarize_fleet,
    write_fleet_results,
)
from engine.bench.reporting.replay_report import table
from engine.bench.reporting.results import environment
from engine.bench.reporting.run_folder import interrupted, run_dir, written
from engine.bench.workloads.layouts import LAYOUTS
from engine.bench.workloads.scenario import SCALES, another_agent, build_scenario
from engine.runtime.engine import Engine


def fleet_prompts(engine: Engine, args: argparse.Namespace, layout: str) -> list[list[list[int]]]:
    """prompts[agent][turn]: every request's token ids, rendered before any run (scripted replies)."""
    base = build_scenario(engine.tokenizer, args.scale, args.seed, args.turns)
    agents = [base] + [
        another_agent(engine.tokenizer, base, args.seed + a, args.scale) for a in range(1, args.agents)
    ]
    out = []
    for sc in agents:
        replies = [turn.reply for turn in sc.turns]
        requests = [LAYOUTS[layout](sc, t, replies) for t in range(len(sc.turns))]
        out.append([engine.render(req.messages, req.tools) for req in requests])
    return out


def full_prefill_rate(engine: Engine, ids: list[int]) -> float:
    """Requests per second that one full (uncached) prefill of `ids` allows: the best of three."""
    best = min(engine.generate(ids, max_new_tokens=1, cache=False).timing.ttft_s for _ in range(3))
    return 1.0 / best


def main(args: argparse.Namespace) -> int:
    engine = open_engine(args)
    prompts = {arm: fleet_prompts(engine, args, arm) for arm in args.layouts}
    reply_tokens = SCALES[args.scale]["reply_tokens"]
    longest = max((p for arm in prompts.values() for agent in arm for p in agent), key=len)
    unit = full_prefill_rate(engine, longest)
    rates: list[float | None] = list(args.rates or [f * unit for f in args.load])
    rates += [] if args.no_closed_loop else [None]
    runs: list[FleetRun] = []
    total = len(rates) * args.repeats * len(args.layouts) * args.agents * args.turns
    bar = tqdm(total=total, desc="fleet", unit="req", leave=False)
    try:
        for rate in rates:
            for r in range(args.repeats):
                order = args.layouts[r % len(args.layouts) :] + args.layouts[: r % len(args.layouts)]
                for position, arm in enumerate(order):
                    engine.reset_cache()
                    seed = args.seed * 1000 + r
                    runs.append(
                        run_fleet(
                            engine, prompts[arm], arm, rate, reply_tokens, seed, r, bar.update, position
                        )
                    )
    except KeyboardInterrupt:
        partial = True
    else:
        partial = False
    bar.close()
    if not runs:
        return interrupted(0, "fleet runs", None)
    total_blocks = engine.blocks.num_blocks
    summary = summarize_fleet(runs, total_blocks)
    out = run_dir(args, "fleet", engine)
    env = environment(engine, "fleet", args, partial) | {"full_prefill_rate": unit}
    title = f"{args.agents} agents, {engine.info['model']} ({engine.info['dtype']}, {engine.info['device']})"
    plot_ttft_vs_rate(summary, out / "ttft_vs_rate.png", f"TTFT from arrival against load: {title}")
    top = max((r.rate for r in runs if r.rate is not None), default=None)
    plot_occupancy(
        [r for r in runs if r.rate == top and r.repeat == 0],
        total_blocks,
        out / "pool_occupancy.png",
        f"KV pool at {top or 0:.2f} req/s: {title}",
    )
    notes = [
        f"{args.agents} agents x {args.turns} turns per run; every reply {reply_tokens} tokens (EOS ignored); "
        f"one full prefill of the longest prompt allows {unit:.2f} requests/s.",
        "TTFT runs from a request's scheduled arrival to its first token (queueing included); tpot is the "
        "median time per output token after the first; throughput is tokens over the run's makespan; "
        "peak_pool is the largest share of the pool's blocks in use at once.",
        *paired_ttft(runs, args.layouts),
        contention_note([r.load for r in runs if r.load is not None], "fleet runs"),
    ]
    write_fleet_results(out, env, runs, summary, notes)
    print(table(summary, COLUMNS))
    if partial:
        return interrupted(len(runs), "fleet runs", out)
    return written(out)
