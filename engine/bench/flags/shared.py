"""Flags several bench commands take: the model and a results folder (`add_run_args`), timed repeats
(`add_bench_args`), trace files and how to read them (`add_trace_args`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from engine.arguments import SEED_MAX, int_flag
from engine.bench.reporting.run_folder import add_out_args
from engine.bench.reporting.stats import MIN_PASSES
from engine.cli import add_model_args
from engine.traces.formats import FORMATS
from engine.traces.mooncake import DEFAULT_BLOCK
from engine.traces.shipped import EXAMPLES


def add_run_args(
    parser: argparse.ArgumentParser, seed_help: str = "weights seed for synthetic: models"
) -> None:
    """What every bench command takes: the model (default `auto`), a results folder and a seed."""
    add_model_args(parser, default_model="auto")
    add_out_args(parser)
    parser.add_argument("--seed", type=int_flag(0, SEED_MAX), default=0, help=seed_help)


def add_bench_args(parser: argparse.ArgumentParser) -> None:
    """The replaying commands' flags: `add_run_args` plus timed repeats (default: the fewest passes at which
    a paired sign test can tell two arms apart, `engine.bench.reporting.stats.MIN_PASSES`)."""
    add_run_args(parser, "scenario seed (and synthetic weights seed)")
    parser.add_argument(
        "--repeats",
        type=int_flag(1),
        default=MIN_PASSES,
        help=f"timed passes (default {MIN_PASSES}: the fewest at which a sign test can give a verdict)",
    )


def add_trace_args(parser: argparse.ArgumentParser) -> None:
    """The flags of the commands that read traces (replay, cluster, export): the files and how to read them."""
    examples = ", ".join(f"example:{name}" for name in EXAMPLES)
    parser.add_argument("traces", nargs="+", help=f"trace files (JSON list or JSONL), or {examples}")
    parser.add_argument(
        "--format",
        choices=list(FORMATS),
        default=None,
        help="the traces' format (default: detected per file)",
    )
    parser.add_argument(
        "--system-file",
        type=Path,
        default=None,
        help="the system prompt, for traces that lack it (Claude Code)",
    )
    parser.add_argument(
        "--tools-file",
        type=Path,
        default=None,
        help="the tool definitions (JSON list), for traces that lack them (Claude Code, Codex)",
    )
    parser.add_argument(
        "--hash-block-size",
        type=int_flag(1),
        default=None,
        help=f"tokens per hash id in Mooncake-format traces (default {DEFAULT_BLOCK})",
    )
