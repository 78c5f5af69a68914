"""`python -m engine.bench fleet`: a fleet of agents sharing one engine and one KV pool, per prompt layout and
offered load: what a cache-breaking layout costs once requests queue behind each other's prefills.

Every agent replays the `bench layout` scenario (the same policies and tools, its own tasks) turn by turn;
the engine batches what is in flight (decode tokens beside chunked prefills). Arms differ only in layout:
the same requests, the same reply lengths (EOS ignored), the same arrival times, the cache emptied before
each run, the arms' order rotated between repeats (each run records its position). Arms are paired by
repeat: an arm's p50 TTFT over the first arm's is the median of the per-repeat ratios, with a sign test.
Loads are offered request rates (open loop, exponential think times) and a closed loop (every agent sends
its next turn as its reply ends); by default the rates are 1x, 2x and 4x the rate one full prefill of the
longest prompt allows, measured first: a layout whose every request is a full prefill saturates at 1x, one
that reuses most of its prompt further up. The default size (8 agents x 2 turns x 2 arms x 4 loads, 128
requests) runs in about 6 minutes on 2 CPU cores with the bundled SmolLM2-135M.
"""

from __future__ import annotations

import argparse
from typing import Any

from tqdm import tqdm

from engine.arguments import float_flag, int_flag
from engine.bench.args import add_run_args, open_engine
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
from engine.bench.reporting.run_folder import interrupted, run_dir
from engine.bench.workloads.layouts import LAYOUTS
from engine.bench.workloads.scenario import SCALES, another_agent, build_scenario
from engine.cli import docs_link
from engine.runtime.engine import Engine


def register(commands: Any) -> None:
    p = commands.add_parser(
        "fleet",
        help="many agents through one engine: TTFT percentiles and throughput per layout and load",
        description=__doc__,
        epilog=docs_link("fleet.md"),
    )
    add_run_args(p, "scenario and arrival seed (and synthetic weights seed)")
    p.add_argument("--agents", type=int_flag(1), default=8, help="concurrent agents (default 8)")
    p.add_argument(
        "--layouts",
        nargs="+",
        choices=list(LAYOUTS),
        default=["stable-first", "timestamp-first"],
        metavar="LAYOUT",
        help="arms (default: stable-first timestamp-first)",
    )
    p.add_argument("--scale", choices=list(SCALES), default="small", help="prompt sizes")
    p.add_argument("--turns", type=int_flag(1), default=2, help="turns per agent (default 2)")
    p.add_argument("--rates", type=float_flag(positive=True), nargs="+", default=None, help="requests / s")
    p.add_argument(
        "--load",
        type=float_flag(positive=True),
        nargs="+",
        default=[1.0, 2.0, 4.0],
        help="without --rates: rates as multiples of what one full prefill allows (default 1 2 4)",
    )
    p.add_argument("--no-closed-loop", action="store_true", help="skip the closed-loop run")
    p.add_argument("--repeats", type=int_flag(1), default=1, help="runs per arm and load (default 1)")
    p.set_defaults(func=main)


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
    print(f"results: {out}")
    return 0
