"""The results folder of a run and what it records: the environment (model, weights digest, versions,
commit, options), JSON and CSV files."""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from engine.engine import Engine

REPO = Path(__file__).resolve().parents[3]


def git_commit() -> str:
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO, capture_output=True, text=True
        ).stdout.strip()
        return sha + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def environment(engine: Engine, command: str, args: argparse.Namespace) -> dict[str, Any]:
    """Model, weights digest, dtype, device, versions, commit and the exact options of this run."""
    return run_environment(engine.info, command, args)


def run_environment(info: dict[str, Any], command: str, args: argparse.Namespace) -> dict[str, Any]:
    """`info` (`engine.identity`: what a run without an engine knows of its model) with the command, options,
    commit, threads and date."""
    options = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items() if k != "func"}
    return info | {
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
