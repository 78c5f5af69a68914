"""`python -m engine.bench needle`: where a fact sits, and how much the answer looks at it.

A delivery log of near-identical JSON records (engine/bench/workloads/delivery_log.py) is sized to each of
--lengths in the model's own tokens, with --facts asked records together at each of --positions (top,
quarter, middle, three-quarters, end of the log, in tokens). Each asked record gets one question ("how many
tubs ... number only"), answered greedily by the engine, and scored right, wrong number (whose record's
number it was) or not a number. While the answer is generated, the engine's own steps report the attention
of the answering row on the asked record's tokens, per layer and head (engine/inspect/span_shares.py): the
answering row is the one whose output is the scored number's first token (the first answer token when
there is no number; the last prompt row when the answer starts with the number). A length whose prompt does
not fit the model's window is refused by name before any work, never cut.
"""

from __future__ import annotations

import argparse

from engine.arguments import int_flag
from engine.bench.flags.shared import add_run_args
from engine.bench.workloads.delivery_log import MAX_FACTS, POSITIONS
from engine.cli import docs_link

DEFAULT_LENGTHS = [
    1000,
    4000,
]  # the chapter's two lengths within 4,000: the reference fits ~15 min on 2 cores


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "needle",
        help="where a fact sits: accuracy and attention on the fact by log length and position",
        description=__doc__,
        epilog=docs_link("context-experiments.md"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_run_args(parser, "log seed (and synthetic weights seed)")
    parser.add_argument(
        "--lengths",
        type=int_flag(64),
        nargs="+",
        default=DEFAULT_LENGTHS,
        help=f"log lengths in the model's tokens (default {' '.join(map(str, DEFAULT_LENGTHS))})",
    )
    parser.add_argument(
        "--positions",
        nargs="+",
        choices=list(POSITIONS),
        default=list(POSITIONS),
        metavar="POSITION",
        help=f"where the asked records sit (default: all of {' '.join(POSITIONS)})",
    )
    parser.add_argument(
        "--facts",
        type=int_flag(1, MAX_FACTS),
        default=8,
        help=f"asked records per log, at most {MAX_FACTS} (their tub counts differ; default 8)",
    )
    parser.add_argument(
        "--max-new-tokens", type=int_flag(1), default=24, help="greedy answer length (default 24)"
    )
    parser.add_argument("--top-heads", type=int_flag(1), default=5, help="heads listed per cell (default 5)")
