"""Timing spread (median, min, max, n) and the plain-text summary table."""

from __future__ import annotations

from engine.bench.machinery.report import table
from engine.bench.machinery.stats import spread


def test_spread_is_median_min_max_and_count() -> None:
    assert spread([3.0, 1.0, 2.0, 10.0]) == {"median": 2.5, "min": 1.0, "max": 10.0, "n": 4}


def test_table_aligns_columns_and_formats_values() -> None:
    text = table(
        [{"name": "a", "ms": 1.23456, "big": 1234.5}, {"name": "long name", "ms": None}],
        ["name", "ms", "big"],
    )
    lines = text.splitlines()
    assert lines[0] == "| name      | ms    | big  |"
    assert lines[2] == "| a         | 1.235 | 1234 |"
    assert lines[3] == "| long name | -     |      |"
    assert len({len(line) for line in lines}) == 1


def test_a_cell_with_newlines_stays_on_its_row() -> None:
    lines = table([{"context": "a\nb"}], ["context"]).splitlines()
    assert len(lines) == 3 and lines[2] == "| a↵b     |"
