"""`python -m engine.bench sink`: how much attention each layer and head puts on the first token(s).

Per layer × head: the share of each query row's attention on token 0 and on the first k tokens, averaged
over rows at or past --min-row (row 0 attends only to itself, rows < k only to the first k, and an early
row r attending uniformly still gives token 0 a share of 1/(r+1)). A head "has a sink" when its token-0
share passes ε. Every prompt runs with and without a leading special token. Attention is causal, so the
first L rows of a prompt are exactly the rows of its L-token prefix: one forward gives every shorter length.
"""

from __future__ import annotations

import argparse

from engine.arguments import float_flag, int_flag
from engine.bench.flags.shared import add_run_args
from engine.bench.workloads.sink_prompts import PROMPTS
from engine.cli import docs_link

CHECK_MAX_TOKENS = 1024  # --check-transformers: eager output_attentions holds every layer's full matrix


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "sink",
        help="attention on the first token(s), per layer and head",
        description=__doc__,
        epilog=docs_link("attention-and-sinks.md"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_run_args(parser)
    parser.add_argument(
        "--prompts",
        nargs="+",
        default=list(PROMPTS),
        help=f"built-in names ({', '.join(PROMPTS)}) or .json message / .txt text files",
    )
    parser.add_argument("--min-row", type=int_flag(0), default=9, help="first query row averaged (default 9)")
    parser.add_argument(
        "--first-k", type=int_flag(1), default=4, help="k for the share on the first k tokens (default 4)"
    )
    parser.add_argument(
        "--epsilon",
        type=float_flag(0.0, maximum=1.0),
        default=0.3,
        help="sink threshold on the token-0 share (default 0.3)",
    )
    parser.add_argument(
        "--check-transformers",
        action="store_true",
        help=f"recompute with transformers' eager attention (prompts up to {CHECK_MAX_TOKENS} tokens)",
    )
