"""`--help` prints the flags without loading torch, transformers, matplotlib or numpy (under 2 s of CPU time,
however busy the machine): `python -m engine.generate`, `python -m engine.serve`, `python -m engine.bench` and
each of its commands, `python -m engine.viz` and its heatmap."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

from engine.bench.__main__ import FLAGS

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "transformers", "matplotlib", "numpy")
# runs the command's --help as `python -m` would, then names the heavy packages it imported
PROBE = """
import runpy, sys
sys.argv = [{module!r}, *{args!r}, "--help"]
try:
    runpy.run_module({module!r}, run_name="__main__", alter_sys=True)
except SystemExit as e:
    print("EXIT", e.code)
print("IMPORTED", *sorted(name for name in {heavy!r} if name in sys.modules))
"""
BENCH = [
    flags.__name__.rsplit(".", 1)[1].replace("_", "-") for flags in FLAGS
]  # every command the parser registers
COMMANDS = [
    ("engine.generate", []),
    ("engine.serve", []),
    ("engine.bench", []),
    *(("engine.bench", [command]) for command in BENCH),
    ("engine.viz", []),
    ("engine.viz", ["heatmap"]),
]


@pytest.mark.parametrize(("module", "args"), COMMANDS, ids=[" ".join([m, *a]) for m, a in COMMANDS])
def test_help_loads_no_torch(module: str, args: list[str]) -> None:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(module=module, args=args, heavy=HEAVY)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert f"usage: python -m {module}" in out and out.splitlines()[-2] == "EXIT 0"
    assert out.splitlines()[-1] == "IMPORTED"
    assert cpu_s < 2.0, f"{module} {' '.join(args)} --help took {cpu_s:.2f} s of CPU time"
