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

from engine.arguments import float_flag, int_flag
from engine.bench.flags.shared import add_run_args
from engine.bench.workloads.layouts import LAYOUTS
from engine.bench.workloads.scenario import SCALES
from engine.cli import docs_link


def register(commands: argparse._SubParsersAction) -> None:
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
