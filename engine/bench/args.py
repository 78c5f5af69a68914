"""The bench commands' flags, the default-model rule (`auto` is Qwen2.5-0.5B-Instruct when it can be had,
else the bundled SmolLM2, with a notice) and the default dtype of timed commands (by what the CPU can do,
said at the start)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from engine.arguments import SEED_MAX, int_flag
from engine.bench.reporting.run_folder import add_out_args, check_out
from engine.bench.reporting.stats import MIN_PASSES
from engine.cli import add_model_args, engine_options
from engine.errors import ModelNotFoundError
from engine.traces.formats import FORMATS
from engine.traces.mooncake import DEFAULT_BLOCK
from engine.traces.shipped import EXAMPLES

if TYPE_CHECKING:
    from engine.runtime.engine import Engine
    from engine.traces.inputs import Inputs

# The flags' modules load no torch (every command's --help runs without it); what runs a command is imported
# in the functions that run it.

DEFAULT_MODEL = "Qwen/Qwen2.5-0.5B-Instruct"
FALLBACK_MODEL = "smollm2-135m"


def add_run_args(
    parser: argparse.ArgumentParser, seed_help: str = "weights seed for synthetic: models"
) -> None:
    """What every bench command takes: the model (default `auto`), a results folder and a seed."""
    add_model_args(parser, default_model="auto")
    add_out_args(parser)
    parser.add_argument("--seed", type=int_flag(0, SEED_MAX), default=0, help=seed_help)


def add_bench_args(parser: argparse.ArgumentParser) -> None:
    """The replaying commands' flags: `add_run_args` plus timed repeats (default: the fewest passes at which
    a paired sign test can tell two arms apart, `engine.bench.reporting.stats.MIN_PASSES`)."""
    add_run_args(parser, "scenario seed (and synthetic weights seed)")
    parser.add_argument(
        "--repeats",
        type=int_flag(1),
        default=MIN_PASSES,
        help=f"timed passes (default {MIN_PASSES}: the fewest at which a sign test can give a verdict)",
    )


def chosen_model(args: argparse.Namespace) -> str:
    """`--model`, with `auto` made Qwen2.5-0.5B-Instruct (local HF cache or the hub) where it can be had,
    else the bundled SmolLM2, with a notice."""
    from engine.loading.sources import resolve

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


# why kv-edit and kv-compose keep the exact default dtype although they time their arms
EXACT_ARMS = (
    "its exact arms must equal the full recompute; in bfloat16 a prefill after a cached prefix rounds "
    "differently from the cold one, and greedy answers part"
)


def open_engine(args: argparse.Namespace, timed: bool = True, exact_because: str | None = None) -> Engine:
    """The engine of `chosen_model`, with a notice when its weights are synthetic. A `timed` command's
    default dtype (no --dtype, or auto) is `engine.devices.timing_dtype` (on a CPU: bfloat16 where it has
    native bfloat16 matrix instructions, else float32); an untimed one keeps the exact default, and so does
    a timed one whose results compare arms that must be exact (`exact_because` says why). Either way one line
    says which dtype and why, and a warning says when the machine is busier than its cores."""
    from engine.bench.harness.contention import busy_warning
    from engine.devices import dtype_name, resolve_device, resolve_dtype, timing_dtype
    from engine.runtime.loader import load

    check_out(args)  # a bad --out costs no model load
    model = chosen_model(args)
    device = resolve_device(args.device)
    if args.dtype not in (None, "", "auto"):
        dtype, why = resolve_dtype(args.dtype, device), "given by --dtype"
    elif timed and exact_because is None:
        dtype, why = timing_dtype(device)
    else:
        because = exact_because or "this command inspects, it does not time"
        dtype, why = resolve_dtype(None, device), f"the exact default ({because})"
    print(f"[dtype {dtype_name(dtype)}: {why}]", file=sys.stderr)
    engine = load(model, args.device, dtype_name(dtype), seed=args.seed, **engine_options(args))
    if timed and (warning := busy_warning()) is not None:
        print(warning, file=sys.stderr)
    if engine.source.synthetic:
        print(
            f"[{model}: synthetic random weights: timings are real, generated text is meaningless]",
            file=sys.stderr,
        )
    return engine


def add_trace_args(parser: argparse.ArgumentParser) -> None:
    """The flags of the commands that read traces (replay, cluster, export): the files and how to read them."""
    examples = ", ".join(f"example:{name}" for name in EXAMPLES)
    parser.add_argument("traces", nargs="+", help=f"trace files (JSON list or JSONL), or {examples}")
    parser.add_argument(
        "--format",
        choices=list(FORMATS),
        default=None,
        help="the traces' format (default: detected per file)",
    )
    parser.add_argument(
        "--system-file",
        type=Path,
        default=None,
        help="the system prompt, for traces that lack it (Claude Code)",
    )
    parser.add_argument(
        "--tools-file",
        type=Path,
        default=None,
        help="the tool definitions (JSON list), for traces that lack them (Claude Code, Codex)",
    )
    parser.add_argument(
        "--hash-block-size",
        type=int_flag(1),
        default=None,
        help=f"tokens per hash id in Mooncake-format traces (default {DEFAULT_BLOCK})",
    )


def read_traces(args: argparse.Namespace) -> Inputs:
    """Every trace of `add_trace_args`, read; the requests in the order they were sent."""
    from engine.traces.inputs import load_inputs
    from engine.traces.sessions import interleave
    from engine.traces.supplied import load_supplied

    supplied = load_supplied(args.system_file, args.tools_file)
    inputs = load_inputs(args.traces, args.format, supplied, args.hash_block_size)
    inputs.requests = interleave(inputs.requests)
    return inputs
