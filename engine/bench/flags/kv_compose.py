"""`python -m engine.bench kv-compose`: build prompts from precomputed "skill" blocks, relocated and spliced,
and compare them with the exact full recompute of the same prompt.

Each skill block is computed once, alone, right after the chat template's preamble (untimed: that is the
cache a composing server keeps). A prompt includes 1-4 of them, in seeded orders, some after a fresh note,
then the question. Arms, interleaved per prompt (order rotated):
- recompute: the whole prompt computed (the reference);
- exact-prefix: the preamble (and a first block right after it) reused exactly, the rest computed;
- splice: every block relocated to where it lands, only notes and the question computed;
- splice+R%: the same, with the first R% of every relocated block recomputed (the selection rule: each
  block's head, where its context changed; not CacheBlend's per-token deviation).
"""

from __future__ import annotations

import argparse

from engine.arguments import float_flag, int_flag
from engine.bench.flags.shared import add_run_args
from engine.cli import docs_link


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "kv-compose",
        help="splice relocated precomputed blocks vs full recompute",
        description=__doc__,
        epilog=docs_link("editable-kv.md"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_run_args(p, "layouts seed (and synthetic weights seed)")
    p.add_argument(
        "--prompts", type=int_flag(1), default=8, help="composed prompts, 1-4 blocks each (default 8)"
    )
    p.add_argument(
        "--repeat", type=int_flag(1), default=3, help="a block's rules repeated this often (default 3)"
    )
    p.add_argument(
        "--recompute",
        type=float_flag(0.0, maximum=1.0),
        default=0.15,
        help="splice+R: share recomputed (default 0.15)",
    )
    p.add_argument("--answer-tokens", type=int_flag(1), default=8, help="greedy tokens compared (default 8)")
