"""`python -m engine.viz heatmap`: the run (its flags: engine/viz/flags.py; the command's description:
engine/viz/__main__.py)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from engine.bench.reporting.run_folder import check_out_file, new_run_dir
from engine.cli import engine_options
from engine.errors import PromptError
from engine.prompts.messages import split_request
from engine.prompts.regions import RenderedPrompt, render_prompt
from engine.runtime.loader import load
from engine.viz.flags import DEFAULT_NAME, LATE, late_layer
from engine.viz.heatmap import draw


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
