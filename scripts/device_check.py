"""One device, end to end: the device tests, the benchmark suite against transformers, the layout bench, and a
summary. Run through scripts/device_check.sh; on a GPU the whole plan is budgeted to finish within 8 minutes after a
warm-up of the attention kernels (FlashInfer's JIT compile at first use: at most 5 minutes, its time reported).

    scripts/device_check.sh cuda|mps|cpu [--dry-run] [--out DIR]

Writes a new folder results/bench/<device>/check-<UTC time>/ (never an existing one, never the baseline):
tests.xml / tests.log, bench-<model>.json / .md / .png per model, layout/, and summary.md + summary.json
(commit and whether the tree was dirty, each step's status and time, test counts, key ratios against the
GPU targets). `cpu` runs the same steps with smaller shapes, so the script is exercised before any GPU is.
Exit status: 0 every step passed, 1 a step failed or timed out, 2 bad usage or an unavailable device.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # this checkout's engine, whatever else is installed

from device_check_summary import summarize  # noqa: E402

TESTS = [  # the tests that take --device / --dtype
    "tests/model/test_decoder.py",
    "tests/loading/test_gguf.py",
    "tests/runtime/test_prefix_cache.py",
    "tests/kv/test_pool_and_window.py",
    "tests/inspect/test_attention.py",
    "tests/test_devices.py",
    "tests/bench/workloads/test_layouts.py",
    "tests/bench/commands/test_layout.py",
]
QUIET = ["-q", "-p", "no:cacheprovider"]


@dataclass(frozen=True)
class Plan:
    """What one device runs. Timeouts are caps: a step over its cap is stopped and reported, the rest go on."""

    dtype: str
    models: tuple[str, ...]  # synthetic presets: the real models' exact shapes, nothing downloaded
    bench_options: str  # shapes and seconds per case: pytest-benchmark fits its rounds to them
    layout_options: str
    decode_context: int  # the decode step the summary leads with
    timeouts: dict[str, int]  # step name -> seconds
    kernel_length: int = 2048  # the prompt of the warm-path kernel check (one block cached)


GPU_MODELS = ("qwen2.5-0.5b", "qwen2.5-7b")
GPU_LAYOUT = "--model synthetic:qwen2.5-0.5b --scale large --repeats 2 --replies scripted"
GPU_TIMEOUTS = {
    "warm-up": 300,  # the paged kernels' first use (FlashInfer's JIT compile): once, before any timed step
    "tests": 120,
    "kernels": 30,
    "kernels-torch": 30,
    "bench-qwen2.5-0.5b": 90,
    "bench-qwen2.5-7b": 150,
    "layout": 60,
}
CPU_LAYOUT = (
    "--model smollm2-135m --scale small --turns 2 --repeats 1 --replies scripted --cache-tokens 8192 "
    "--layouts stable-first timestamp-first"
)
CPU_TIMEOUTS = {"tests": 1200, "kernels": 300, "bench-qwen2.5-0.5b": 900, "layout": 300}
PLANS = {
    "cuda": Plan("bfloat16", GPU_MODELS, "--shapes device", GPU_LAYOUT, 2048, GPU_TIMEOUTS),
    "mps": Plan("float16", GPU_MODELS, "--shapes device", GPU_LAYOUT, 2048, GPU_TIMEOUTS),
    "cpu": Plan("float32", GPU_MODELS[:1], "--shapes smoke", CPU_LAYOUT, 128, CPU_TIMEOUTS, 256),
}


@dataclass(frozen=True)
class Step:
    name: str
    argv: list[str]
    timeout_s: int
    outputs: tuple[str, ...]  # files or folders under the check folder that the step writes


def steps(device: str, plan: Plan, out: Path) -> list[Step]:
    """The plan's commands, in order: (CUDA) the attention kernels' warm-up, tests, the attention kernels (on
    CUDA of the backend auto picks and of the torch fallback), one benchmark run per model, the layout bench."""
    on = ["--device", device, "--dtype", plan.dtype]
    pytest = [sys.executable, "-m", "pytest"]
    check = [sys.executable, str(REPO / "scripts" / "kernel_check.py"), *on]
    warm = [*check, "--warm-up", "--length", str(plan.kernel_length), "--out", str(out / "warm-up.json")]
    run = [Step("warm-up", warm, plan.timeouts["warm-up"], ("warm-up.json",))] if device == "cuda" else []
    run += [
        Step(
            "tests",
            [*pytest, *TESTS, *on, *QUIET, f"--junitxml={out / 'tests.xml'}"],
            plan.timeouts["tests"],
            ("tests.xml",),
        ),
        *(
            Step(
                name,
                [
                    *check,
                    "--attention",
                    backend,
                    "--length",
                    str(plan.kernel_length),
                    "--out",
                    str(out / f"{name}.json"),
                ],
                plan.timeouts[name],
                (f"{name}.json",),
            )
            # on CUDA the torch fallback too, beside the library backend auto picks where one is installed
            for name, backend in [("kernels", "auto"), ("kernels-torch", "torch")][
                : 2 if device == "cuda" else 1
            ]
        ),
    ]
    for model in plan.models:
        name = f"bench-{model}"
        argv = [
            *pytest,
            "benchmarks",
            "--devices",
            device,
            "--dtype",
            plan.dtype,
            "--model",
            f"synthetic:{model}",
            *plan.bench_options.split(),
            *QUIET,
            f"--benchmark-json={out / name}.json",
        ]
        run.append(Step(name, argv, plan.timeouts[name], (f"{name}.json", f"{name}.md", f"{name}.png")))
    layout = [
        sys.executable,
        "-m",
        "engine.bench",
        "layout",
        *on,
        *plan.layout_options.split(),
        "--out",
        str(out / "layout"),
    ]
    return run + [Step("layout", layout, plan.timeouts["layout"], ("layout",))]


def run_step(step: Step, out: Path) -> dict:
    """Run one step in its own process group (a timeout stops everything it started); log to <name>.log."""
    start = time.perf_counter()
    with (out / f"{step.name}.log").open("w") as log:
        proc = subprocess.Popen(
            step.argv,
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=os.environ | {"HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"},
        )
        try:
            rc = proc.wait(timeout=step.timeout_s)
            status = (
                "passed" if rc == 0 else "failed" if rc > 0 else f"killed by signal {-rc} (out of memory?)"
            )
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            rc, status = proc.wait(), "timeout"
    if status == "passed" and step.name.startswith("bench-"):
        import bench_report  # matplotlib: only once a benchmark JSON exists

        bench_report.main([str(out / f"{step.name}.json")])
    return {
        "step": step.name,
        "status": status,
        "returncode": rc,
        "seconds": round(time.perf_counter() - start, 1),
        "timeout_s": step.timeout_s,
        "command": shlex.join(step.argv),
        "outputs": list(step.outputs),
    }


def check_device(device: str, dtype: str) -> str:
    """The device's description; raises DeviceError (one line) when it is absent or cannot run `dtype`."""
    from engine.devices import device_description, resolve_device, resolve_dtype

    resolved = resolve_device(device)
    resolve_dtype(dtype, resolved)
    return device_description(resolved)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/device_check.sh",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("device", choices=list(PLANS), help="the device to check")
    parser.add_argument(
        "--dry-run", action="store_true", help="print the plan (commands, time caps), run nothing"
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="check folder (default: a new timestamped one)"
    )
    args = parser.parse_args(argv)
    plan = PLANS[args.device]
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    out = (args.out or REPO / "results" / "bench" / args.device / f"check-{stamp}").resolve()
    if out.exists() and any(out.iterdir()):
        print(
            f"error: {out} already holds results; choose another --out (nothing is overwritten)",
            file=sys.stderr,
        )
        return 2
    planned = steps(args.device, plan, out)
    if args.dry_run:
        print(f"device check of {args.device} in {plan.dtype}, writing {out}")
        for step in planned:
            print(f"[{step.name}, at most {step.timeout_s} s] {shlex.join(step.argv)}")
        print(f"at most {sum(s.timeout_s for s in planned)} s in all")
        return 0
    from engine.errors import DeviceError

    try:
        description = check_device(args.device, plan.dtype)
    except DeviceError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    from engine.bench.reporting.results import git_commit  # before anything is written: the tree as it was

    commit = git_commit()
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for step in planned:
        print(f"[{step.name}] at most {step.timeout_s} s ...", flush=True)
        results.append(run_step(step, out))
        print(f"[{step.name}] {results[-1]['status']} in {results[-1]['seconds']} s", flush=True)
    summary = summarize(out, args.device, description, plan.dtype, plan.decode_context, commit, results)
    (out / "summary.json").write_text(json.dumps(summary["data"], indent=2) + "\n")
    (out / "summary.md").write_text(summary["markdown"])
    print(summary["markdown"])
    return 0 if all(r["status"] == "passed" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
