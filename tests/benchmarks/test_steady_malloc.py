"""benchmarks/steady_malloc.py: with glibc's thresholds fixed, a large block freed and allocated again keeps its
pages (no page faults on the second use), where by default each fresh mapping faults them in again."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# A 24 MiB buffer written, freed, then allocated and written again: the second round's minor page faults.
PROBE = """
import ctypes, resource, sys
sys.path.insert(0, {repo!r})
from benchmarks.steady_malloc import steady_malloc
said = steady_malloc() if {steady} else "default"
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
size = 24 * 2**20
def use():
    p = libc.malloc(size)
    ctypes.memset(p, 1, size)
    libc.free(p)
use()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
use()
print(said, "|", resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def second_use_faults(steady: bool) -> tuple[str, int]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(repo=str(REPO), steady=steady)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    said, faults = out.rsplit("|", 1)
    return said.strip(), int(faults)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc: Linux")
def test_a_freed_large_block_keeps_its_pages() -> None:
    said, steady = second_use_faults(True)
    assert said == "glibc mmap threshold 32 MiB, trim threshold 1024 MiB"
    _, default = second_use_faults(False)
    pages = 24 * 2**20 // 4096
    assert default > pages // 2  # mapped afresh: every page faulted in again
    assert steady < pages // 20  # from the heap: its pages kept
