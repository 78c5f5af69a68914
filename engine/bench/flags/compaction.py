"""`python -m engine.bench compaction`: compaction policies x (stable | timestamp-first) prefix over a long
conversation: budget utilization, cached share, computed tokens, TTFT and compaction events per turn; with
--answers, what each policy's context still knows at the end, judged by ten answers."""

from __future__ import annotations

import argparse

from engine.arguments import int_flag
from engine.bench.flags.shared import add_bench_args
from engine.bench.workloads.compaction_policies import POLICIES
from engine.cli import docs_link


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "compaction",
        help="compaction policies against a token budget, with stable or timestamp-first prefixes",
        description=__doc__,
        epilog=docs_link("statusbar-and-compaction.md"),
    )
    add_bench_args(p)
    p.add_argument("--turns", type=int_flag(1), default=50, help="conversation length (default 50)")
    p.add_argument(
        "--budget", type=int_flag(1), default=1024, help="token budget of a request (default 1024)"
    )
    p.add_argument(
        "--result-tokens", type=int_flag(1), default=60, help="tokens per bulky tool result (default 60)"
    )
    p.add_argument(
        "--policies",
        nargs="+",
        choices=list(POLICIES),
        default=list(POLICIES),
        metavar="POLICY",
        help=f"policies (default: all of {', '.join(POLICIES)})",
    )
    p.add_argument(
        "--summarizer",
        choices=["extractive", "model"],
        default="extractive",
        help="extractive (deterministic, default) or the model itself",
    )
    p.add_argument(
        "--answers",
        action="store_true",
        help="ask each policy's context at the end ten questions (the conversation then carries two value "
        "updates in its user turns)",
    )
