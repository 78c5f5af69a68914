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

from engine.arguments import DEFAULT_CACHE_TOKENS, float_flag, int_flag
from engine.bench.flags.shared import add_run_args, add_trace_args
from engine.cli import docs_link
from engine.cluster.pools import POOLS
from engine.cluster.routers import ROUTERS, RouterSettings

DEFAULT_COST = "h100-llama-3.1-8b"
LAYOUTS = ("as-sent", "timestamp-first")  # the prompts as sent, or each with its request's time at the top


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
