"""`python -m engine.bench kv-edit`: change one decision-relevant field of a cached prompt and compare ways
of updating the K/V against the exact full recompute of the new prompt.

Variants, each on the same (old, new) field values, with and without "think step by step first":
- exact: full recompute of the new prompt (the reference);
- exact-prefix: exact, reusing the old prompt's K/V up to the first changed token (a prefix cache);
- stale: the old prompt's K/V as they are (no update; only the last token computed);
- edit: recompute only the changed field span, keep the downstream K/V stale (relocated if it moved);
- edit+W: the field span and the next W tokens;
- erratum: the old prompt untouched and a correction appended before the question (exact, a prefix hit).
Decision agreement: the option (city, yes/no) a variant's greedy answer names equals the exact run's.
Then the layout tie-in: timestamp-first rescued by editing the time line in place (see `time_line.py`).
"""

from __future__ import annotations

import argparse

from engine.arguments import int_flag
from engine.bench.flags.shared import add_run_args
from engine.cli import docs_link


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "kv-edit",
        help="edit a field of a cached prompt in place vs recompute vs erratum",
        description=__doc__,
        epilog=docs_link("editable-kv.md"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_run_args(p, "pairs and context seed (and synthetic weights seed)")
    p.add_argument(
        "--pairs", type=int_flag(1), default=20, help="seeded (old, new) field-value pairs (default 20)"
    )
    p.add_argument(
        "--window",
        type=int_flag(0),
        default=16,
        help="edit+W: tokens recomputed after the field (default 16)",
    )
    p.add_argument(
        "--policies", type=int_flag(0), default=8, help="policy lines of downstream context (default 8)"
    )
    p.add_argument(
        "--answer-tokens", type=int_flag(1), default=12, help="greedy tokens of a direct answer (default 12)"
    )
    p.add_argument(
        "--cot-tokens", type=int_flag(1), default=24, help="greedy tokens with step-by-step (default 24)"
    )
    p.add_argument("--turns", type=int_flag(2), default=3, help="layout tie-in: scenario turns (default 3)")
