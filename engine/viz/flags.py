"""`python -m engine.viz heatmap`'s flags: the layer, head and row specs, the transform's name, the default
layer (late) and the file written; nothing here loads torch or matplotlib."""

from __future__ import annotations

import argparse
from pathlib import Path

from engine.arguments import int_flag
from engine.bench.reporting.run_folder import add_out_args
from engine.cli import add_model_args
from engine.viz.transforms import TRANSFORMS

DEFAULT_NAME = "attention.png"  # the file written in the run folder, or in an --out folder
LATE = "late"  # --layer's default: one late layer, four fifths of the way up (SmolLM2's 24 of 30)


def late_layer(num_layers: int) -> int:
    """The default layer: late layers hold the sharpest, most readable patterns; the mean over every layer
    on a linear scale is nearly black (most mass sits on a few sink tokens)."""
    return num_layers * 4 // 5


def layer_spec(text: str) -> int | str | None:
    """'all' (None), 'late' (the default, `late_layer`) or a layer index from 0 (no negative indexing: -1 is
    refused, not the last layer)."""
    return None if text == "all" else text if text == LATE else int_flag(0)(text)


def head_spec(text: str) -> int | str:
    """mean, max, all, or a head index from 0."""
    return text if text in ("mean", "max", "all") else int_flag(0)(text)


def rows_spec(text: str) -> int | None:
    """'all' (None) or 'last:K' (K)."""
    if text == "all":
        return None
    kind, _, count = text.partition(":")
    if kind != "last" or not count.isdigit() or int(count) < 1:
        raise argparse.ArgumentTypeError(f"--rows must be 'all' or 'last:K' with K >= 1, got {text!r}")
    return int(count)


def add_heatmap_args(p: argparse.ArgumentParser) -> None:
    add_model_args(p)
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--prompt", help="a user message (rendered with the chat template unless --raw)")
    source.add_argument("--messages", type=Path, help="JSON file: a list of messages, or {messages, tools}")
    p.add_argument("--raw", action="store_true", help="send --prompt as raw text, without the chat template")
    p.add_argument(
        "--layer",
        type=layer_spec,
        default=LATE,
        help="a layer index, all, or late (default: the layer four fifths of the way up)",
    )
    p.add_argument("--head", type=head_spec, default="mean", help="a head index, mean (default), max, or all")
    p.add_argument("--rows", type=rows_spec, default=None, help="all (default) or last:K query rows")
    p.add_argument(
        "--transform",
        choices=list(TRANSFORMS),
        default="log",
        help="colour scale transform (default log: a linear scale shows little but the sink tokens)",
    )
    p.add_argument(
        "--max-new-tokens",
        type=int_flag(0),
        default=0,
        help="decode N tokens greedily and show their rows too",
    )
    add_out_args(p, f"PNG file, or a folder to hold {DEFAULT_NAME}")
