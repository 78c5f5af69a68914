"""Every Python block of README.md and docs/*.md runs as written: a page's blocks in order, in one namespace
(a later block may use what an earlier one defined), against the bundled SmolLM2 where the page loads it. A
block that cannot run here says why in its fence: ```python no-run: REASON (GitHub highlights it as Python)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```python([^\n]*)\n(.*?)^```", re.S | re.M)
NO_RUN = re.compile(r"^ no-run: \S.*$")


def python_blocks(page: Path) -> list[tuple[str, str, int]]:
    """(info string after `python`, code, first line) of every ```python block of `page`."""
    text = page.read_text()
    return [(m[1], m[2], text.count("\n", 0, m.start()) + 2) for m in BLOCK.finditer(text)]


@pytest.mark.parametrize("page", [p for p in PAGES if python_blocks(p)], ids=lambda p: p.name)
def test_every_python_block_runs_or_says_why_not(page: Path) -> None:
    namespace: dict[str, object] = {"__name__": f"docs.{page.stem}"}
    for info, code, line in python_blocks(page):
        if info:
            assert NO_RUN.match(info), f"{page.name}:{line}: ```python{info}: runs, or says `no-run: REASON`"
            continue
        exec(compile("\n" * (line - 1) + code, str(page), "exec"), namespace)  # tracebacks name the doc line


def test_the_pages_have_python_blocks() -> None:
    """The collector finds blocks (a changed fence style would silently test nothing)."""
    assert sum(len(python_blocks(p)) for p in PAGES) >= 9
