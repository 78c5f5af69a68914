"""The bench commands' flags and the default-model rule: `auto` is Qwen2.5-0.5B-Instruct when it can be
had, else the bundled SmolLM2 (with a notice)."""

from __future__ import annotations

import argparse
import sys

from engine.arguments import SEED_MAX, int_flag
from engine.bench.reporting.run_folder import add_out_args, check_out
from engine.cli import add_model_args, engine_options
from engine.errors import ModelNotFoundError
from engine.loading.sources import resolve
from engine.runtime.engine import Engine
from engine.runtime.loader import load

DEFAULT_MODEL = "Qwen/Qwen2.5-0.5B-Instruct"
FALLBACK_MODEL = "smollm2-135m"


def add_run_args(
    parser: argparse.ArgumentParser, seed_help: str = "weights seed for synthetic: models"
) -> None:
    """What every bench command takes: the model (default `auto`), a results folder and a seed."""
    add_model_args(parser, default_model="auto")
    add_out_args(parser)
    parser.add_argument("--seed", type=int_flag(0, SEED_MAX), default=0, help=seed_help)


def add_bench_args(parser: argparse.ArgumentParser, repeats: int = 3) -> None:
    """The replaying commands' flags: `add_run_args` plus timed repeats."""
    add_run_args(parser, "scenario seed (and synthetic weights seed)")
    parser.add_argument(
        "--repeats", type=int_flag(1), default=repeats, help=f"timed repeats per turn (default {repeats})"
    )


def chosen_model(args: argparse.Namespace) -> str:
    """`--model`, with `auto` made Qwen2.5-0.5B-Instruct (local HF cache or the hub) where it can be had,
    else the bundled SmolLM2, with a notice."""
    if args.model != "auto":
        return args.model
    try:
        resolve(DEFAULT_MODEL, args.seed)
        return DEFAULT_MODEL
    except ModelNotFoundError:
        print(
            f"[{DEFAULT_MODEL} is neither cached nor downloadable here; using the bundled {FALLBACK_MODEL}]",
            file=sys.stderr,
        )
        return FALLBACK_MODEL


def open_engine(args: argparse.Namespace) -> Engine:
    """The engine of `chosen_model`, with a notice when its weights are synthetic."""
    check_out(args)  # a bad --out costs no model load
    model = chosen_model(args)
    engine = load(model, args.device, args.dtype, seed=args.seed, **engine_options(args))
    if engine.source.synthetic:
        print(
            f"[{model}: synthetic random weights: timings are real, generated text is meaningless]",
            file=sys.stderr,
        )
    return engine
