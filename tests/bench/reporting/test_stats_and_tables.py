"""Timing spread (median, min, max, n), the plain-text summary table and its markdown-safe cells."""

from __future__ import annotations

import re

from engine.bench.harness.replayer import TurnRecord
from engine.bench.reporting.replay_report import markdown_text, spread_notes, summarize_turns, table
from engine.bench.reporting.stats import pass_ratios, per_pass, spread, verdict


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


def test_ranged_columns_show_median_and_min_max() -> None:
    text = table([{"ttft_ms": 120.0, "ttft_ms_min": 110.0, "ttft_ms_max": 131.0}], ["ttft_ms"])
    assert "ttft_ms [min–max]" in text and "120 [110–131]" in text


def test_per_pass_values_use_the_passes_every_turn_completed() -> None:
    turns = [[1.0, 2.0, 3.0], [4.0, 6.0]]  # a Ctrl-C left the last turn one pass short
    assert per_pass(turns) == [2.5, 4.0] and per_pass(turns, sum) == [5.0, 8.0]
    assert pass_ratios([2.0, 4.0, 6.0], [1.0, 2.0]) == [2.0, 2.0]


def test_verdict_needs_ranges_apart_and_more_than_one_pass() -> None:
    assert verdict([1.0, 1.2], [1.5, 1.9]) == "lower"
    assert verdict([2.0, 2.2], [1.5, 1.9]) == "higher"
    assert verdict([1.0, 1.6], [1.5, 1.9]) == "within noise"
    assert verdict([1.0], [2.0]) == "one pass: no spread"


def _record(name: str, turn: int, passes: list[float]) -> TurnRecord:
    s = spread(passes)
    tokens = dict(prompt_tokens=100, cached_tokens=50, computed_tokens=50, cached_share=0.5)
    where = dict(first_divergence=50, divergence_region="system", divergence_context="")
    change = dict(first_change=-1, change_region="", change_context="")
    ttft = dict(passes=len(passes), ttft_s=s["median"], ttft_min_s=s["min"], ttft_max_s=s["max"])
    rest = dict.fromkeys(
        [
            "cold_ttft_s",
            "cold_ttft_min_s",
            "cold_ttft_max_s",
            "prefill_s",
            "lookup_s",
            "render_s",
            "tokenize_s",
        ],
        0.0,
    )
    return TurnRecord(name, turn, **tokens, **where, **change, **ttft, **rest, reply="", ttft_passes_s=passes)


def test_summary_gives_per_pass_spread_ratio_range_and_verdict() -> None:
    records = [
        _record("base", 1, [9.0, 9.0, 9.0]),  # turn 1 is left out of the TTFT summary
        _record("base", 2, [1.0, 1.1, 1.2]),
        _record("slow", 1, [9.0, 9.0, 9.0]),
        _record("slow", 2, [2.0, 2.4, 3.6]),
        _record("close", 1, [9.0, 9.0, 9.0]),
        _record("close", 2, [1.15, 1.0, 1.3]),
    ]
    rows = {r["conversation"]: r for r in summarize_turns(records, "base")}
    assert rows["slow"]["passes"] == 3
    assert (rows["slow"]["ttft_ms"], rows["slow"]["ttft_ms_min"], rows["slow"]["ttft_ms_max"]) == (
        2400,
        2000,
        3600,
    )
    assert rows["slow"]["ttft_ratio"] == 2400 / 1100
    assert (rows["slow"]["ttft_ratio_min"], rows["slow"]["ttft_ratio_max"]) == (2.0, 3.0)  # per-pass ratios
    assert rows["slow"]["vs_baseline"] == "higher" and rows["close"]["vs_baseline"] == "within noise"
    assert rows["base"]["total_ttft_s_min"] == 10.0 and rows["base"]["total_ttft_s_max"] == 10.2
    notes = " ".join(spread_notes(list(rows.values())))
    assert "`slow` (higher)" in notes and "within noise (ranges overlap): `close`" in notes


def test_contexts_cannot_break_a_markdown_table() -> None:
    context = "x = f(a)\n| `b` \\ c⟂\td"
    assert markdown_text(context) == "x = f(a)⏎\\| \\`b\\` \\\\ c⟂⇥d"
    lines = table([{"change_context": context, "first_change": 12}], ["change_context", "first_change"])
    lines = lines.splitlines()
    assert len(lines) == 3  # header, rule, one row: the newline did not split it
    assert len(re.findall(r"(?<!\\)\|", lines[2])) == 3  # only the cell separators are bare pipes
