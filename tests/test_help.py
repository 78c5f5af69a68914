"""`--help` prints the flags without loading torch, transformers or matplotlib (under 2 s of CPU time, however
busy the machine): `python -m engine.generate` and `python -m engine.serve`."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "transformers", "matplotlib")
# runs the command's --help as `python -m` would, then names the heavy packages it imported
PROBE = """
import runpy, sys
sys.argv = [{module!r}, "--help"]
try:
    runpy.run_module({module!r}, run_name="__main__", alter_sys=True)
except SystemExit:
    pass
print("IMPORTED", *sorted(name for name in {heavy!r} if name in sys.modules))
"""


@pytest.mark.parametrize("module", ["engine.generate", "engine.serve"])
def test_help_loads_no_torch(module: str) -> None:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(module=module, heavy=HEAVY)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert "usage: python -m " in out and "--model" in out
    assert out.splitlines()[-1] == "IMPORTED"
    assert cpu_s < 2.0, f"{module} --help took {cpu_s:.2f} s of CPU time"
