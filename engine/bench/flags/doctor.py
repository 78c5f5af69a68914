"""`python -m engine.bench doctor TRACE [TRACE ...]`: what breaks a trace's prefix, the rewrite that fixes
each cause, and what it would buy, measured.

Reads every trace `replay` reads. For every request whose prefix broke before what it extends (a session's
first request against the closest earlier prompt), the spans that differ, in the messages: region, character
and token offsets, before and after. Each span is named: a clock or date, a path, an id / nonce, a
counter, a reordered list, a re-rendered history, a truncated or compacted history, a changed tool
definition, a model or system swap, the cache's TTL or eviction, tools a template renders after the break;
else unknown. Each cause with a rewrite is rewritten away (every line of every request kept: checked), and
the original, each rewrite and all of them together are analyzed without a model for the local engine and
each --provider rule (cached share, computed tokens, input cost); --measure replays the original and each
rewrite through the model, paired in one run (TTFT per request, median [min-max] over --repeats passes).
Causes a request cannot be rewritten to avoid get what providers allow (a TTL: the longer retention, a
keep-alive) or, for a model or system swap, what they cost measured. --apply OUT writes the trace with each
cause's rewrite applied, in the format it was read from.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from engine.bench.flags.shared import add_bench_args, add_trace_args
from engine.cli import docs_link
from engine.traces.providers.registry import HOSTED, LOCAL


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "doctor",
        help="what breaks a trace's prefix, the rewrite per cause, and its measured gain",
        description=__doc__,
        epilog=docs_link("doctor.md"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_trace_args(p)
    p.add_argument(
        "--provider",
        nargs="+",
        choices=[LOCAL, *HOSTED],
        default=list(HOSTED),
        help="the hosted cache rules measured beside the local engine (default: all)",
    )
    p.add_argument("--measure", action="store_true", help="also replay through the model: TTFT, paired")
    p.add_argument(
        "--apply", type=Path, default=None, metavar="OUT", help="write the rewritten trace in its own format"
    )
    add_bench_args(p)
