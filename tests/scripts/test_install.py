"""scripts/install.sh, run against stand-in interpreters that log what they are asked: it finds python3
where there is no python, installs torch 2.13.0 from PyTorch's CPU index on Linux when none is installed,
keeps an installed torch (as `.ci/run` leaves it), and says so in one line when no Python 3.10+ exists."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
STAND_IN = """#!/bin/sh
echo "$0 $*" >> "$LOG"
case "$*" in
  *"import torch"*) [ "$HAS_TORCH" = 1 ] ;;
  *) exit 0 ;;
esac
"""
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the CPU index is for Linux")


def install(tmp_path: Path, interpreters: tuple[str, ...], has_torch: bool) -> tuple[int, str, list[str]]:
    """Run install.sh with only `interpreters` (stand-ins) and the tools it needs on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("dirname", "uname"):
        os.symlink(shutil.which(tool), bin_dir / tool)
    for name in interpreters:
        (bin_dir / name).write_text(STAND_IN)
        (bin_dir / name).chmod(0o755)
    log = tmp_path / "log"
    env = {"PATH": str(bin_dir), "LOG": str(log), "HAS_TORCH": "1" if has_torch else "0"}
    proc = subprocess.run(
        [shutil.which("bash"), str(REPO / "scripts" / "install.sh")], env=env, capture_output=True, text=True
    )
    calls = [line.split(" ", 1)[1] for line in log.read_text().splitlines()] if log.exists() else []
    return proc.returncode, proc.stderr, calls


def test_python3_alone_and_torch_from_the_cpu_index(tmp_path) -> None:
    code, _, calls = install(tmp_path, ("python3",), has_torch=False)
    assert code == 0
    torch = "-m pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"
    assert torch in calls and "-m pip install -e .[dev]" in calls


def test_an_installed_torch_is_kept(tmp_path) -> None:
    code, _, calls = install(tmp_path, ("python", "python3"), has_torch=True)
    assert code == 0 and not any("install torch" in c for c in calls)


def test_no_python_is_one_line(tmp_path) -> None:
    code, err, _ = install(tmp_path, (), has_torch=False)
    assert (
        code == 2
        and err == "error: no Python 3.10+ found as python or python3; set PYTHON=/path/to/python3\n"
    )
