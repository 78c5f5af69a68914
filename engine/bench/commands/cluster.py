"""`python -m engine.bench cluster TRACE --replicas N [N ...] --routers R [R ...]`: the trace served by N
replicas behind each routing policy, simulated: per replica the engine's prefix cache (a pool of
--pool-tokens, an optional CPU tier, the eviction policy of --eviction) and a clock from a cost model
(published figures of an accelerator with --cost, or this engine's own measurements on this machine with
--calibrate), requests queueing per replica at the trace's arrival times (scaled by --load).

Hash-id traces are simulated at their block size; every other format `replay` reads is rendered and
tokenized with --model's chat template and tokenizer (no weights) at --block-size. One replica serves every
request exactly as `replay --analyze` does (the same cached tokens, request by request).
"""

from __future__ import annotations

import argparse
import itertools
import sys
from dataclasses import asdict
from pathlib import Path

from tqdm import tqdm

from engine.arguments import float_flag, int_flag
from engine.bench.args import add_run_args, add_trace_args, read_traces
from engine.bench.harness.cluster_inputs import LAYOUTS, workloads_of
from engine.bench.reporting.cluster_report import COLUMNS, shown, write_cluster_results
from engine.bench.reporting.replay_report import table
from engine.bench.reporting.results import run_environment
from engine.bench.reporting.run_folder import check_out, named_run_dir, slug, written
from engine.cli import docs_link
from engine.cluster.costs import CostModel, load_cost
from engine.cluster.pools import POOLS
from engine.cluster.routers import ROUTERS, RouterSettings
from engine.cluster.simulate import ClusterConfig, check_load, simulate
from engine.cluster.workload import Workload
from engine.errors import InvalidArgumentError
from engine.kv.pool import DEFAULT_CACHE_TOKENS

DEFAULT_COST = "h100-llama-3.1-8b"


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "cluster",
        help="a trace over N replicas behind each router, simulated: hit rate, load, TTFT percentiles",
        description=__doc__,
        epilog=docs_link("cluster.md"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_trace_args(p)
    p.add_argument(
        "--replicas", type=int_flag(1, 1024), nargs="+", default=[1, 2, 4, 8], help="replica counts"
    )
    p.add_argument(
        "--routers",
        nargs="+",
        choices=list(ROUTERS),
        default=list(ROUTERS),
        help="routing policies (default all)",
    )
    p.add_argument(
        "--layouts",
        nargs="+",
        choices=LAYOUTS,
        default=["as-sent"],
        help="the prompts as sent, and/or with each request's time at the top (timestamp-first)",
    )
    p.add_argument(
        "--load",
        type=float_flag(positive=True),
        nargs="+",
        default=[1.0],
        help="multiples of the trace's own request rate (arrival times divided by it; default 1)",
    )
    p.add_argument(
        "--pool-tokens",
        type=int_flag(1),
        default=None,
        help="each replica's KV pool (default: what replay --analyze gets: every block of a hash-id trace, "
        f"else {DEFAULT_CACHE_TOKENS:,})",
    )
    p.add_argument(
        "--cpu-tier-tokens", type=int_flag(0), default=0, help="each replica's CPU tier (default none)"
    )
    p.add_argument(
        "--host-gb-s",
        type=float_flag(positive=True),
        default=None,
        help="CPU tier <-> accelerator bandwidth, GB/s (default: the cost model's host link)",
    )
    p.add_argument("--eviction", choices=list(POOLS), default="lru", help="the pools' eviction policy")
    cost = p.add_mutually_exclusive_group()
    cost.add_argument(
        "--cost",
        default=None,
        help=f"cost file (JSON) or a shipped one (default {DEFAULT_COST}: published H100 figures)",
    )
    cost.add_argument(
        "--calibrate",
        action="store_true",
        help="measure this engine (--model) on this machine first, fit the cost model, save it as cost.json",
    )
    defaults = RouterSettings()
    p.add_argument(
        "--cache-threshold",
        type=float_flag(0, maximum=1),
        default=defaults.cache_threshold,
        help="prefix-aware (SGLang)",
    )
    p.add_argument(
        "--balance-abs-threshold",
        type=int_flag(0),
        default=defaults.balance_abs_threshold,
        help="prefix-aware",
    )
    p.add_argument(
        "--balance-rel-threshold",
        type=float_flag(1),
        default=defaults.balance_rel_threshold,
        help="prefix-aware",
    )
    p.add_argument(
        "--overlap-weight", type=float_flag(0), default=defaults.overlap_weight, help="kv-cost (Dynamo)"
    )
    p.add_argument(
        "--router-temperature", type=float_flag(0), default=defaults.temperature, help="kv-cost (Dynamo)"
    )
    add_run_args(p, "seed of the routers' tie-breaks (and of synthetic weights for --calibrate)")
    p.set_defaults(func=main)


def settings(args: argparse.Namespace) -> RouterSettings:
    return RouterSettings(
        cache_threshold=args.cache_threshold,
        balance_abs_threshold=args.balance_abs_threshold,
        balance_rel_threshold=args.balance_rel_threshold,
        overlap_weight=args.overlap_weight,
        temperature=args.router_temperature,
    )


def pool_blocks(args: argparse.Namespace, workload: Workload) -> int:
    """Each replica's pool in blocks: --pool-tokens, else what replay --analyze gives the same trace."""
    if args.pool_tokens is not None:
        blocks = args.pool_tokens // workload.block_size
    elif workload.unit == "hash ids":
        blocks = workload.distinct_blocks + workload.most_blocks
    else:
        blocks = DEFAULT_CACHE_TOKENS // workload.block_size
    if blocks < workload.most_blocks:
        raise InvalidArgumentError(
            f"--pool-tokens {blocks * workload.block_size:,}: the largest request holds "
            f"{workload.most_blocks * workload.block_size:,} tokens at once; give at least that"
        )
    return blocks


def cost_model(args: argparse.Namespace, out: Path, loaded: CostModel | None) -> CostModel:
    """The `--cost` file `loaded`, else the model fitted here (`--calibrate`, saved in `out`)."""
    model = loaded
    if model is None:
        from engine.bench.harness.calibration import calibrate  # loads the model: only here

        model = calibrate(args)
        model.save(out / "cost.json")
        print(
            f"[cost model fitted to this machine, saved as {out / 'cost.json'} (pass it to --cost)]",
            file=sys.stderr,
        )
    if args.host_gb_s is not None:
        model = CostModel(**{**asdict(model), "host_bytes_per_s": args.host_gb_s * 1e9})
    return model


def main(args: argparse.Namespace) -> int:
    check_out(args)
    inputs = read_traces(args)
    workloads, model = workloads_of(args, inputs)
    workload = workloads[0]
    blocks = pool_blocks(args, workload)  # one pool size for every layout
    tier = args.cpu_tier_tokens // workload.block_size
    config = ClusterConfig(blocks, args.eviction, tier, settings(args), args.seed)
    for w, load in itertools.product(workloads, args.load):
        check_load(w, load)
    loaded = None if args.calibrate else load_cost(args.cost or DEFAULT_COST)  # refused before the folder
    out = named_run_dir(args, f"cluster-{slug(Path(workload.name).stem)}")
    cost = cost_model(args, out, loaded)
    plan = [(w, r, n, x) for w in workloads for r in args.routers for n in args.replicas for x in args.load]
    results, runs = [], []
    for w, router, n, load in tqdm(plan, desc="cluster", unit="run"):
        results.append(simulate(w, router, n, config, cost, load))
        runs.append(results[-1].summary(w))
    env = run_environment({"tokenizer_model": model}, "cluster", args) | {
        "workload": {
            "name": workload.name,
            "unit": workload.unit,
            "block_size": workload.block_size,
            "requests": len(workload.requests),
            "left_out": workload.refused,
            "distinct_blocks": workload.distinct_blocks,
        },
        "pool_tokens": blocks * workload.block_size,
        "cpu_tier_tokens": tier * workload.block_size,
        "eviction": args.eviction,
        "router_settings": asdict(config.settings),
        "cost": asdict(cost),
    }
    notes = list(inputs.notes)
    if workload.unit == "hash ids":
        notes.append("sessions inferred from the hash ids (the trace names none): see docs/cluster.md")
    write_cluster_results(out, env, workloads, results, runs, notes)
    print(table([shown(r) for r in runs], COLUMNS))
    return written(out)
