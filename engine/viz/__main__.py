"""`python -m engine.viz heatmap`: attention heatmaps of a prompt, from the engine's own queries and keys.

--layer L|all, --head H|mean|max|all (all: a layer × head grid), --rows last:K|all (last rows: the cheap view
of a long prompt), --transform none|log|sqrt|exclude-sink, --max-new-tokens N adds the rows of a greedy
answer.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from engine.arguments import int_flag
from engine.bench.reporting.run_folder import add_out_args, check_out_file, new_run_dir
from engine.cli import add_model_args, docs_link, engine_options, run
from engine.errors import PromptError
from engine.prompts.messages import split_request
from engine.prompts.regions import RenderedPrompt, render_prompt
from engine.runtime.loader import load
from engine.viz.heatmap import TRANSFORMS, draw

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


def read_messages(path: Path) -> tuple[list[dict], list[dict] | None]:
    """A JSON list of chat messages, or an object {"messages": [...], "tools": [...]}."""
    if not path.is_file():
        raise PromptError(f"--messages: {path} does not exist")
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise PromptError(f"--messages: {path} is not valid JSON ({e})") from None
    messages, tools = split_request(data)
    if not isinstance(messages, list):
        raise PromptError(f"--messages: {path} holds no list of messages")
    return messages, tools


def heatmap(args: argparse.Namespace) -> int:
    messages = read_messages(args.messages) if args.messages else None
    if args.prompt is not None and not args.prompt.strip():
        raise PromptError("empty prompt: --prompt has no text")
    if args.raw and args.messages:
        raise PromptError("--raw applies to --prompt only")
    target = check_out_file(args, DEFAULT_NAME)  # before the model loads: a bad --out costs nothing
    engine = load(args.model, args.device, args.dtype, **engine_options(args))
    if engine.source.synthetic:
        print(
            f"[{args.model}: synthetic random weights: these maps show no trained behaviour]", file=sys.stderr
        )
    prompt: RenderedPrompt
    if messages is not None:
        prompt = render_prompt(engine.tokenizer, messages[0], messages[1])
    else:
        prompt = engine.prompts.rendered(
            args.prompt if args.raw else [{"role": "user", "content": args.prompt}]
        )
    if args.max_new_tokens:
        prompt = prompt.with_generated(
            engine.generate(prompt.token_ids, args.max_new_tokens, cache=False).token_ids
        )
    n = len(prompt.token_ids)
    rows = None if args.rows is None else range(n - min(args.rows, n), n)
    layer = late_layer(engine.config.num_layers) if args.layer == LATE else args.layer
    layers = None if layer is None else [layer]
    heads = [args.head] if isinstance(args.head, int) else None
    maps = engine.attention(prompt, layers, heads, rows)
    view = "all" if isinstance(args.head, int) else args.head
    title = f"{engine.source.model_id}: {n} tokens, rows {maps.rows[0]}..{maps.rows[-1]}"
    out = target or new_run_dir("heatmap", engine) / DEFAULT_NAME
    draw(maps, view, args.transform, out, title)
    print(f"wrote {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m engine.viz", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser(
        "heatmap",
        help="attention heatmap(s) of one prompt, written to a PNG",
        epilog=docs_link("attention-and-sinks.md"),
    )
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
    p.set_defaults(func=heatmap)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    run(main)
