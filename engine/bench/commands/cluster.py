"""`python -m engine.bench cluster`: the run (its description and flags: engine/bench/flags/cluster.py)."""

from __future__ import annotations

import argparse
import itertools
import sys
from dataclasses import asdict
from pathlib import Path

from tqdm import tqdm

from engine.bench.args import read_traces
from engine.bench.flags.cluster import DEFAULT_COST
from engine.bench.harness.cluster_inputs import workloads_of
from engine.bench.reporting.cluster_report import COLUMNS, shown, write_cluster_results
from engine.bench.reporting.replay_report import table
from engine.bench.reporting.results import run_environment
from engine.bench.reporting.run_folder import check_out, named_run_dir, slug, written
from engine.cluster.costs import CostModel, load_cost
from engine.cluster.routers import RouterSettings
from engine.cluster.simulate import ClusterConfig, check_load, simulate
from engine.cluster.workload import Workload
from engine.errors import InvalidArgumentError
from engine.kv.pool import DEFAULT_CACHE_TOKENS


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
