"""The code base stays lint-clean (ruff, configured in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_ruff_is_clean() -> None:
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "engine", "tests", "benchmarks", "scripts"],
        cwd=root,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
