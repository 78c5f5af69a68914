"""Shared command-line plumbing: output cut short by the reader (`| head`) ends a command quietly."""

from __future__ import annotations

import subprocess
import sys

PRINTS_A_LOT = """
from engine.cli import run

def main(argv):
    for i in range(100_000):
        print("line", i)
    return 0

run(main)
"""


def test_a_reader_that_stops_early_ends_the_command_quietly() -> None:
    """`... | head -3`: no BrokenPipeError traceback, exit status 1 (Python's documented recipe)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", PRINTS_A_LOT], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert [proc.stdout.readline() for _ in range(3)] == ["line 0\n", "line 1\n", "line 2\n"]
    proc.stdout.close()  # the reader is gone: the next write fails with EPIPE
    assert proc.wait(timeout=60) == 1
    assert proc.stderr.read() == ""
