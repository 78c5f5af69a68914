"""`python -m engine.bench status-attention`: does the model look at an `<agent_status>` block?

A replayed trajectory: the agent has called a number three times (three tool calls and their results) and
the user asks it to call again. It runs without and with a status block after the user's request. For
the last prompt row (the one that picks the answer's first token) and for the rows of the greedy answer,
per layer: the attention share on the status block, on the raw call records and on token 0, averaged
over heads (and the strongest head); "excl. token 0" renormalises each row without token 0, the sink.
"""

from __future__ import annotations

import argparse

from engine.arguments import int_flag
from engine.bench.flags.shared import add_run_args
from engine.cli import docs_link


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "status-attention",
        help="attention on an <agent_status> block vs raw call records",
        description=__doc__,
        epilog=docs_link("attention-and-sinks.md"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_run_args(parser)
    parser.add_argument(
        "--max-new-tokens", type=int_flag(1), default=48, help="greedy answer length (default 48)"
    )
