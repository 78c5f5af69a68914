"""What a bench command runs on, once its flags are parsed: the default-model rule (`auto` is
Qwen2.5-0.5B-Instruct when it can be had, else the bundled SmolLM2, with a notice), the engine with the default
dtype of timed commands (by what the CPU can do, said at the start), and the traces read. The flags themselves
are in `engine/bench/flags/`."""

from __future__ import annotations

import argparse
import sys

from engine.bench.harness.contention import busy_warning
from engine.bench.reporting.run_folder import check_out
from engine.cli import engine_options
from engine.devices import dtype_name, resolve_device, resolve_dtype, timing_dtype
from engine.errors import ModelNotFoundError
from engine.loading.sources import resolve
from engine.runtime.engine import Engine
from engine.runtime.loader import load
from engine.traces.inputs import Inputs, load_inputs
from engine.traces.sessions import interleave
from engine.traces.supplied import load_supplied

DEFAULT_MODEL = "Qwen/Qwen2.5-0.5B-Instruct"
FALLBACK_MODEL = "smollm2-135m"


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


def read_traces(args: argparse.Namespace) -> Inputs:
    """Every trace of `add_trace_args`, read; the requests in the order they were sent."""
    supplied = load_supplied(args.system_file, args.tools_file)
    inputs = load_inputs(args.traces, args.format, supplied, args.hash_block_size)
    inputs.requests = interleave(inputs.requests)
    return inputs
