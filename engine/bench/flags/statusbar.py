"""`python -m engine.bench statusbar`: status-bar layouts replayed through the engine, and the
replace-vs-append cost model tested against measurement over a sweep of S, R and N."""

from __future__ import annotations

import argparse

from engine.arguments import int_flag
from engine.bench.flags.shared import add_bench_args
from engine.cli import docs_link


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "statusbar",
        help="status bar: replace vs append vs in-system, and the cost model",
        description=__doc__,
        epilog=docs_link("statusbar-and-compaction.md"),
    )
    add_bench_args(p)
    p.add_argument(
        "--steps", type=int_flag(1), default=8, help="status updates N in the main run (default 8)"
    )
    p.add_argument(
        "--status-tokens", type=int_flag(1), default=150, help="status size S in tokens (default 150)"
    )
    p.add_argument(
        "--between-tokens",
        type=int_flag(1),
        default=60,
        help="R: the agent's own tokens between two updates (its reply and call; default 60)",
    )
    p.add_argument(
        "--sweep-status",
        type=int_flag(1),
        nargs="*",
        default=[128, 320],
        help="S values of the sweep (none, as in a bare --sweep-status: no sweep, the main run only)",
    )
    p.add_argument(
        "--sweep-between", type=int_flag(1), nargs="*", default=[64, 160], help="R values of the sweep"
    )
    p.add_argument(
        "--sweep-steps", type=int_flag(1), nargs="*", default=[4, 10], help="N values of the sweep"
    )
