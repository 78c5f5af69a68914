"""The bench commands' flags and the default-model rule: `auto` is Qwen2.5-0.5B-Instruct when it can be
had, else the bundled SmolLM2 (with a notice)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from engine.cli import add_model_args, engine_options
from engine.engine import Engine
from engine.errors import ModelNotFoundError
from engine.loader import load

DEFAULT_MODEL = "Qwen/Qwen2.5-0.5B-Instruct"
FALLBACK_MODEL = "smollm2-135m"


def add_run_args(
    parser: argparse.ArgumentParser, seed_help: str = "weights seed for synthetic: models"
) -> None:
    """What every bench command takes: the model (default `auto`), a results folder and a seed."""
    add_model_args(parser, default_model="auto")
    parser.add_argument("--out", type=Path, default=None, help="results folder (default results/<run>)")
    parser.add_argument("--seed", type=int, default=0, help=seed_help)


def add_bench_args(parser: argparse.ArgumentParser, repeats: int = 3) -> None:
    """The replaying commands' flags: `add_run_args` plus timed repeats."""
    add_run_args(parser, "scenario seed (and synthetic weights seed)")
    parser.add_argument(
        "--repeats", type=int, default=repeats, help=f"timed repeats per turn (default {repeats})"
    )


def open_engine(args: argparse.Namespace) -> Engine:
    """`auto`: Qwen2.5-0.5B-Instruct from the local HF cache or the hub; else the bundled SmolLM2, with a
    notice."""
    model = args.model
    if model == "auto":
        try:
            return load(DEFAULT_MODEL, args.device, args.dtype, seed=args.seed, **engine_options(args))
        except ModelNotFoundError:
            print(
                f"[{DEFAULT_MODEL} is neither cached nor downloadable here; "
                f"using the bundled {FALLBACK_MODEL}]",
                file=sys.stderr,
            )
            model = FALLBACK_MODEL
    engine = load(model, args.device, args.dtype, seed=args.seed, **engine_options(args))
    if engine.source.synthetic:
        print(
            f"[{model}: synthetic random weights: timings are real, generated text is meaningless]",
            file=sys.stderr,
        )
    return engine
