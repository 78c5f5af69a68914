"""What every bench command shares: flags, the default-model rule, the environment record, the results
folder (JSON, CSV, markdown), robust timing statistics and the summary table."""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import statistics
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import torch

from engine.cli import add_model_args, engine_options
from engine.engine import Engine
from engine.errors import ModelNotFoundError
from engine.loader import load

DEFAULT_MODEL = "Qwen/Qwen2.5-0.5B-Instruct"
FALLBACK_MODEL = "smollm2-135m"
REPO = Path(__file__).resolve().parents[3]


def add_run_args(parser: argparse.ArgumentParser, seed_help: str = "weights seed for synthetic: models") -> None:
    """What every bench command takes: the model (default `auto`), a results folder and a seed."""
    add_model_args(parser, default_model="auto")
    parser.add_argument("--out", type=Path, default=None, help="results folder (default results/<run>)")
    parser.add_argument("--seed", type=int, default=0, help=seed_help)


def add_bench_args(parser: argparse.ArgumentParser, repeats: int = 3) -> None:
    """The replaying commands' flags: `add_run_args` plus timed repeats."""
    add_run_args(parser, "scenario seed (and synthetic weights seed)")
    parser.add_argument("--repeats", type=int, default=repeats, help=f"timed repeats per turn (default {repeats})")


def open_engine(args: argparse.Namespace) -> Engine:
    """`auto`: Qwen2.5-0.5B-Instruct from the local HF cache or the hub; else the bundled SmolLM2, with a notice."""
    model = args.model
    if model == "auto":
        try:
            return load(DEFAULT_MODEL, args.device, args.dtype, seed=args.seed, **engine_options(args))
        except ModelNotFoundError:
            print(f"[{DEFAULT_MODEL} is neither cached nor downloadable here; using the bundled {FALLBACK_MODEL}]",
                  file=sys.stderr)  # fmt: skip
            model = FALLBACK_MODEL
    engine = load(model, args.device, args.dtype, seed=args.seed, **engine_options(args))
    if engine.source.synthetic:
        print(f"[{model}: synthetic random weights: timings are real, generated text is meaningless]", file=sys.stderr)
    return engine


def git_commit() -> str:
    try:
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                             check=True).stdout.strip()  # fmt: skip
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               capture_output=True, text=True).stdout.strip()  # fmt: skip
        return sha + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def environment(engine: Engine, command: str, args: argparse.Namespace) -> dict[str, Any]:
    """Model, weights digest, dtype, device, versions, commit and the exact options of this run."""
    options = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items() if k != "func"}
    return engine.info | {
        "command": command,
        "options": options,
        "commit": git_commit(),
        "threads": torch.get_num_threads(),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }


def run_dir(args: argparse.Namespace, command: str, engine: Engine) -> Path:
    """results/<command>-<model>-<device>, unless --out says otherwise."""
    if args.out is not None:
        out = args.out
    else:
        slug = engine.source.model_id.replace("/", "_").replace(":", "_").lower()
        out = REPO / "results" / f"{command}-{slug}-{engine.device.type}"
    out.mkdir(parents=True, exist_ok=True)
    return out


def write_json(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, indent=1, ensure_ascii=False, default=str) + "\n")


def write_csv(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    if not rows:
        path.write_text("")
        return
    fields = list(dict.fromkeys(k for row in rows for k in row))
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


def spread(values: Iterable[float]) -> dict[str, float]:
    """Median and min/max of repeated timings (the shared machines here are noisy: report the spread)."""
    v = sorted(values)
    return {"median": statistics.median(v), "min": v[0], "max": v[-1], "n": len(v)}


def table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    """A plain-text table (also valid markdown) of the given columns."""
    cells = [[_fmt(row.get(c, "")) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) if cells else len(c) for i, c in enumerate(columns)]
    line = lambda items: "| " + " | ".join(s.ljust(w) for s, w in zip(items, widths, strict=True)) + " |"  # noqa: E731
    return "\n".join([line(columns), line(["-" * w for w in widths]), *(line(r) for r in cells)])


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 100 else f"{value:.0f}"
    return str(value)
