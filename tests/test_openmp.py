"""engine/openmp.py: torch's OpenMP threads wait passively unless the user chose, as libgomp itself reports."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.openmp import wait_passively

ROOT = Path(__file__).resolve().parent.parent


def libgomp_spin_count(code: str, **env: str) -> str:
    """GOMP_SPINCOUNT as libgomp reads it when `code` loads torch (OMP_DISPLAY_ENV prints its settings)."""
    environ = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    out = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code],
        cwd=ROOT,
        env={**environ, "OMP_DISPLAY_ENV": "VERBOSE", **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return next(
        line.split("=")[1].strip(" '") for line in out.stderr.splitlines() if "GOMP_SPINCOUNT" in line
    )


def test_importing_engine_first_makes_libgomp_wait_without_spinning() -> None:
    assert libgomp_spin_count("import torch") == "300000"  # libgomp's default: a few ms of spinning
    assert libgomp_spin_count("import engine, torch") == "0"
    assert libgomp_spin_count("import engine; engine.load") == "0"  # the public API's first use loads torch
    assert libgomp_spin_count("import engine, torch", OMP_WAIT_POLICY="ACTIVE") != "0"  # the user's choice


def test_the_users_wait_variables_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "torch")
    environ = {"GOMP_SPINCOUNT": "1000"}
    assert wait_passively(environ) == "user" and environ == {"GOMP_SPINCOUNT": "1000"}
    environ = {}
    assert wait_passively(environ) == "passive" and environ == {"OMP_WAIT_POLICY": "PASSIVE"}


def test_torch_loaded_first_is_warned_about_and_nothing_is_set() -> None:
    environ: dict[str, str] = {}
    with pytest.warns(RuntimeWarning, match="OMP_WAIT_POLICY=PASSIVE"):
        assert wait_passively(environ) == "too late"
    assert environ == {}
