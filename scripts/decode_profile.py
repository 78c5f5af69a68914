"""Where one decode step's time goes, op by op, beside the weight stream it cannot go below.

    python scripts/decode_profile.py [--model smollm2-135m] [--dtype float32] [--context 512]
                                     [--rounds 40] [--steps 100] [--top 25]

The step and the stream are those of `benchmarks/test_decode.py::test_decode_weight_stream`: one row's
`ModelRunner.run` at `context` tokens (its greedy token read back), and one row through every matrix the step
multiplies by (`benchmarks/weight_stream.py`). First both are timed unprofiled, alternating round by round
(which goes first alternates): median [min-max] of each and of the per-round ratio step / stream, the
benchmark's number. Then each runs `--steps` times under `torch.profiler` and every aten op is listed with its
calls and self time per step on both sides, largest difference first; the ops the step adds over the stream,
the matrix multiplies' own difference, and the host time outside any op (the profiled step's wall time less its
ops' self time: Python, the runner, the profiler's own cost per op) add up to the profiled step / stream gap.
The profiler adds about half a microsecond per op, so its per-step times run above the unprofiled ones: read its
table for where the time goes, the unprofiled line for how much. CPU only (on a GPU the self times would be
the host's launches, not the kernels).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's engine

import engine  # noqa: E402  (before torch: its OpenMP threads wait passively, as a user's do)

# isort: split
import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from benchmarks.harness import alternating_times, decode_request, random_tokens  # noqa: E402
from benchmarks.weight_stream import weight_rows, weight_stream  # noqa: E402
from engine.arguments import int_flag  # noqa: E402
from engine.bench.reporting.results import git_commit  # noqa: E402
from engine.bench.reporting.stats import paired  # noqa: E402
from engine.cli import run  # noqa: E402
from engine.devices import cpu_bf16_flags, dtype_name  # noqa: E402
from engine.runtime.engine import Engine  # noqa: E402

MATMULS = {"aten::mm", "aten::addmm", "aten::linear", "aten::matmul"}  # the stream's work; the rest is added
Table = dict[str, tuple[float, float]]  # aten op -> (calls, self microseconds) per call


def op_table(fn: Callable[[], object], steps: int) -> tuple[Table, float]:
    """Per aten op, (calls, self microseconds) per call of `fn` under the profiler, and the profiled wall
    microseconds per call."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        for _ in range(steps):
            fn()
        wall_us = (time.perf_counter() - start) / steps * 1e6
    ops = {
        e.key: (e.count / steps, e.self_cpu_time_total / steps)
        for e in prof.key_averages()
        if e.key.startswith("aten::")
    }
    return ops, wall_us


def step_and_stream(
    ours: Engine, context: int, rounds: int, steps: int
) -> tuple[dict[str, list[float]], dict[str, tuple[Table, float]]]:
    """One row's decode step at `context` cached tokens and its weight stream: the seconds of each over
    `rounds` alternating unprofiled rounds (after 4 of warm-up), and each side's op table and profiled wall
    microseconds per call over `steps` calls."""
    prompt = random_tokens(context + 1, seed=0, vocab=ours.config.vocab_size)
    ours.generate(prompt, max_new_tokens=1)  # publishes every full block: the step reads them in the pool
    stream = weight_stream(weight_rows(ours.model))
    with decode_request(ours, prompt) as req:

        def step() -> int:
            req.seq.num_kv = context  # every call rewrites the same position
            return ours.runner.run([(req, 1)])[1].argmax().item()

        sides = {"step": step, "stream": stream}
        alternating_times(sides, 4, ours.device)  # warm-up
        seconds = alternating_times(sides, rounds, ours.device)
        return seconds, {name: op_table(fn, steps) for name, fn in sides.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument(
        "--dtype", default=None, help="float32, bfloat16, ... (default: the model's choice here)"
    )
    parser.add_argument(
        "--context",
        type=int_flag(),
        default=512,
        help="tokens cached before the step, whole blocks (default 512)",
    )
    parser.add_argument(
        "--rounds", type=int_flag(), default=40, help="unprofiled rounds of each side (default 40)"
    )
    parser.add_argument(
        "--steps", type=int_flag(), default=100, help="profiled calls of each side (default 100)"
    )
    parser.add_argument(
        "--top", type=int_flag(), default=25, help="ops listed, largest difference first (default 25)"
    )
    args = parser.parse_args(argv)

    ours = engine.load(args.model, "cpu", args.dtype, cache_tokens=args.context + 4096)
    if args.context % ours.blocks.block_size:  # only whole blocks are cached: the step must read all of them
        parser.error(f"--context must be a multiple of the block size, {ours.blocks.block_size}")
    seconds, tables = step_and_stream(ours, args.context, args.rounds, args.steps)

    flags = " ".join(cpu_bf16_flags()) or "no bfloat16 matrix instructions"
    print(
        f"decode step against its weight stream: {ours.source.model_id}, {dtype_name(ours.dtype)}, cpu "
        f"({torch.get_num_threads()} threads, {flags}), context {args.context}; commit {git_commit()}, "
        f"load {os.getloadavg()[0]:.2f} at the end"
    )
    for name, values in seconds.items():
        ms = [v * 1e3 for v in values]
        print(
            f"  {name:6s} {statistics.median(ms):8.3f} ms [{min(ms):.3f}-{max(ms):.3f}], n={len(ms)} (unprofiled)"
        )
    ratio = paired(seconds["step"], seconds["stream"], unit="rounds")
    print(
        f"  step / stream {ratio['ratio']:.3f} [{ratio['ratio_min']:.3f}-{ratio['ratio_max']:.3f}], n={ratio['n']}"
    )

    (step_ops, step_wall), (stream_ops, stream_wall) = tables["step"], tables["stream"]
    print(
        f"\nprofiled, per call: step {step_wall:.0f} us, stream {stream_wall:.0f} us (gap {step_wall - stream_wall:.0f})"
    )
    print(f"  {'op':52s} {'calls':>7s} {'step us':>9s} {'stream us':>9s} {'diff us':>9s}")
    names = sorted(set(step_ops) | set(stream_ops), key=lambda k: -abs(diff(k, step_ops, stream_ops)))
    for key in names[: args.top]:
        calls, us = step_ops.get(key, (0.0, 0.0))
        print(
            f"  {key[:52]:52s} {calls:7.0f} {us:9.1f} {stream_ops.get(key, (0, 0.0))[1]:9.1f} {diff(key, step_ops, stream_ops):9.1f}"
        )
    matmul = sum(diff(k, step_ops, stream_ops) for k in names if k in MATMULS)
    added = sum(diff(k, step_ops, stream_ops) for k in names if k not in MATMULS)
    step_host = step_wall - sum(us for _, us in step_ops.values())
    stream_host = stream_wall - sum(us for _, us in stream_ops.values())
    print(
        f"  the gap: matrix multiplies {matmul:+.0f} us, the step's other ops {added:+.0f} us "
        f"({sum(c for k, (c, _) in step_ops.items() if k not in MATMULS):.0f} calls), host outside ops "
        f"{step_host - stream_host:+.0f} us (step {step_host:.0f}, stream {stream_host:.0f})"
    )
    return 0


def diff(key: str, step_ops: Table, stream_ops: Table) -> float:
    return step_ops.get(key, (0.0, 0.0))[1] - stream_ops.get(key, (0.0, 0.0))[1]


if __name__ == "__main__":
    run(main)  # a model that does not load: one line, exit status 2
