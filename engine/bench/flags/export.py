"""`python -m engine.bench export TRACE [TRACE ...] --block-size N --out FILE`: any trace `replay` reads,
written as a Mooncake hash-id trace (JSONL: `timestamp` ms, `input_length`, `output_length`, `hash_ids` at
N tokens per id), for the serving benchmarks that replay that format (AIPerf's `mooncake_trace` dataset,
SGLang's bench).

Traces with text are rendered and tokenized as `replay --analyze` does (--model's chat template and
tokenizer), interleaved by time: each full block of a prompt gets the id of its prefix (equal ids, equal
prefixes up to that block), a last partial block an id of its own; `output_length` is the reply the trace
holds (else its recorded output tokens, else 1). Hash-id traces are re-blocked to a multiple of their own
block size (default: their own). Requests over the model's context, or without content, are left out and
counted. A Mooncake replay cannot reuse a recorded reply (its server generates its own), so the export's
hit rate is the source's with replies not cached: `replay --analyze` of the file gives that.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from engine.arguments import SEED_MAX, int_flag
from engine.bench.flags.shared import add_trace_args
from engine.cli import add_model_args, docs_link


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "export",
        help="any trace as a Mooncake hash-id trace (JSONL) at a chosen block size, for AIPerf or SGLang's bench",
        description=__doc__,
        epilog=docs_link("replay.md"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_trace_args(p)
    p.add_argument(
        "--to", choices=["mooncake"], default="mooncake", help="the format written (default mooncake)"
    )
    add_model_args(p, default_model="auto")
    p.set_defaults(block_size=None)
    p.add_argument("--out", type=Path, required=True, help="the JSONL file to write")
    p.add_argument("--overwrite", action="store_true", help="replace --out if it exists")
    p.add_argument("--seed", type=int_flag(0, SEED_MAX), default=0, help="weights seed for synthetic: models")
