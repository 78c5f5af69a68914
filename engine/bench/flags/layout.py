"""`python -m engine.bench layout`: TTFT and cached tokens per turn, stable-first against cache-breaking
layouts."""

from __future__ import annotations

import argparse
from pathlib import Path

from engine.arguments import int_flag
from engine.bench.flags.shared import add_bench_args
from engine.bench.harness.endpoint import add_endpoint_args
from engine.bench.workloads.layouts import LAYOUTS
from engine.bench.workloads.scenario import SCALES
from engine.cli import docs_link

# Who writes the replies that join each layout's history (and what a result says about it).
REPLIES = {
    "reference": "the reference layout's model writes each reply (pass 0) and every other layout is "
    "teacher-forced the same reply, so only the layout differs (default)",
    "scripted": "fixed scripted replies in every layout, reproducible across models",
    "own-confounded": "each layout's model writes its own replies: histories then differ in content as well "
    "as layout, so the comparison is CONFOUNDED",
}


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "layout",
        help="stable-first vs timestamp-first and other cache-breaking layouts",
        description=__doc__,
        epilog=docs_link("layout.md"),
    )
    add_bench_args(p)
    p.add_argument(
        "--layouts",
        nargs="+",
        choices=list(LAYOUTS),
        default=list(LAYOUTS),
        metavar="LAYOUT",
        help=f"layouts to compare (default: all of {', '.join(LAYOUTS)})",
    )
    p.add_argument("--scale", choices=list(SCALES), default="small", help="prompt sizes (large is for GPUs)")
    p.add_argument(
        "--turns", type=int_flag(1), default=None, help="turns per conversation (default: the scale's)"
    )
    p.add_argument(
        "--replies",
        choices=list(REPLIES),
        default="reference",
        help="; ".join(f"{k}: {v}" for k, v in REPLIES.items()),
    )
    add_endpoint_args(p, max_tokens=None)
    p.add_argument(
        "--write-traces",
        type=Path,
        default=None,
        metavar="DIR",
        help="write each layout's conversation as a trace (<layout>.jsonl, scripted replies) and run nothing "
        "(for bench replay and bench doctor)",
    )
    p.add_argument(
        "--cache-salt",
        action="store_true",
        help="with --endpoint: isolate each conversation by vLLM's cache_salt field instead of a cache reset",
    )
