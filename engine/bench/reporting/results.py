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

from engine.machine_load import AT_START, QUIET, load_averages
from engine.runtime.engine import Engine

REPO = Path(__file__).resolve().parents[3]  # the checkout, for its commit only: results go to the cwd


def git_commit(repo: Path = REPO) -> str:
    """The short commit of kvtestbed's own checkout at `repo` (`+dirty` when files outside results/ have
    uncommitted changes), or "unknown" when `repo` is not one: no git, no repository, or a repository that
    does not track this package (an install inside another project's tree, whose commit says nothing of
    this code)."""

    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True)

    try:
        if not git("ls-files", "--", "engine/__init__.py").stdout.strip():
            return "unknown"
        sha = git("rev-parse", "--short", "HEAD").stdout.strip()
        # results/ is left out: regenerating one result must not mark the next one dirty
        dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)results").stdout
        return sha + ("+dirty" if dirty.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def environment(
    engine: Engine, command: str, args: argparse.Namespace, partial: bool = False
) -> dict[str, Any]:
    """Model, weights digest, dtype, device, versions, commit and the exact options of this run; `partial`:
    it was interrupted (Ctrl-C) and holds only what finished."""
    return run_environment(engine.info, command, args, partial)


def run_environment(
    info: dict[str, Any], command: str, args: argparse.Namespace, partial: bool = False
) -> dict[str, Any]:
    """`info` (`engine.runtime.identity`: what a run without an engine knows of its model) with the command, options,
    commit, threads, the load averages when the command started and when it wrote this, date and whether the run
    was interrupted."""
    options = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items() if k != "func"}
    return info | {
        "command": command,
        "partial": partial,
        "options": options,
        "commit": git_commit(),
        "threads": torch.get_num_threads(),
        "load_average_at_start": AT_START,
        "load_average_at_end": load_averages(),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }


def provenance(env: dict[str, Any]) -> list[str]:
    """The lines that open every report: the commit it came from, and a loud warning when the tree had
    uncommitted changes (such a result is not reproducible from its commit)."""
    lines = [f"- commit `{env['commit']}`, {env['date']}"]
    load = env.get("load_average_at_start")
    if load is not None:
        quiet = "quiet" if load[0] < QUIET else "**busy: its timings are not a reference**"
        lines.append(
            f"- load average when it started {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} (1/5/15 min): {quiet}"
        )
    if env["commit"].endswith("+dirty") or env["commit"] == "unknown":
        lines.insert(
            0, "> **NOT A REFERENCE RESULT: made from a tree with uncommitted changes (or outside git);**"
        )
        lines.insert(1, "> **its commit does not reproduce it.**")
    return lines


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
