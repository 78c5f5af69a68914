"""Timing spread (median, min, max, n), the plain-text summary table and its markdown-safe cells."""

from __future__ import annotations

import re

import pytest

from engine.bench.harness.replayer import TurnRecord
from engine.bench.reporting.replay_report import markdown_text, spread_notes, summarize_turns, table
from engine.bench.reporting.stats import (
    MIN_PASSES,
    min_passes,
    paired,
    pass_ratios,
    per_pass,
    rank_sum,
    sign_test,
    spread,
    verdict,
)


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


def test_the_sign_test_is_exact_and_two_sided() -> None:
    assert sign_test([2.0] * 6) == (6, 2 / 2**6)
    assert sign_test([0.5, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0]) == (7, 2 * (1 + 7) / 2**7)
    assert sign_test([1.0, 1.0, 3.0]) == (1, 1.0)  # ties carry no sign
    assert sign_test([-3.0, -1.0], center=0.0) == (2, 0.5)
    assert MIN_PASSES == min_passes(0.05) == 6 and min_passes(0.01) == 8


def test_verdicts_need_enough_passes_and_a_paired_test() -> None:
    assert verdict([2.0, 2.1]) == ("too few passes", 0.5)  # apart ranges at n = 2 are not an effect
    assert verdict([0.8] * 5) == ("too few passes", 2 / 2**5)
    assert verdict([1.31, 1.22, 1.45, 1.28, 1.36, 1.19, 1.5]) == ("higher", 2 / 2**7)  # a known effect, n = 7
    assert verdict([0.7, 0.8, 0.75, 0.9, 0.6, 0.85, 0.7])[0] == "lower"
    no_effect = [1.02, 0.97, 1.05, 0.99, 1.01, 0.96, 1.03, 0.98]  # signs split 4:4
    assert verdict(no_effect) == ("within noise", 1.0)
    assert verdict([3.0, -1.0, 2.0, 4.0, 5.0, 6.0], center=0.0, unit="turns") == ("within noise", 0.21875)


def test_paired_ratios_are_the_median_of_per_pass_ratios() -> None:
    warm, cold = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [2.0, 2.0, 6.0, 8.0, 10.0, 60.0]
    c = paired(warm, cold)
    assert (c["ratio"], c["ratio_min"], c["ratio_max"], c["n"]) == (0.5, 0.1, 1.0, 6)
    assert (c["verdict"], c["p"]) == ("too few passes", 2 / 2**5)  # a tie: 5 passes carry a sign, all below
    assert paired([], [])["verdict"] == "no pairs"


def _record(name: str, turn: int, passes: list[float], cold: list[float] | None = None) -> TurnRecord:
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
    lists = dict(ttft_passes_s=passes, cold_ttft_passes_s=cold or [])
    return TurnRecord(name, turn, **tokens, **where, **change, **ttft, **rest, reply="", **lists)


def test_summary_gives_per_pass_spread_ratio_range_and_verdict() -> None:
    base = [1.0, 1.1, 1.2, 1.0, 1.1, 1.2, 1.0]
    slow = [2.0, 2.4, 3.6, 2.2, 2.5, 2.1, 2.3]  # a known effect: every pass slower
    close = [1.15, 1.0, 1.3, 0.9, 1.2, 1.1, 0.95]  # the baseline's passes give or take: 3 up, 3 down, 1 tie
    records = [
        _record("base", 1, [9.0] * 7),  # turn 1 is left out of the TTFT summary
        _record("base", 2, base, cold=[2 * x for x in base]),
        _record("slow", 1, [9.0] * 7),
        _record("slow", 2, slow, cold=[x * 1.01 for x in slow[:-1]] + [slow[-1] * 0.99]),
        _record("close", 1, [9.0] * 7),
        _record("close", 2, close),
    ]
    rows = {r["conversation"]: r for r in summarize_turns(records, "base")}
    assert rows["slow"]["passes"] == 7
    assert (rows["slow"]["ttft_ms"], rows["slow"]["ttft_ms_min"], rows["slow"]["ttft_ms_max"]) == (
        2300,
        2000,
        3600,
    )
    ratios = sorted(s / b for s, b in zip(slow, base, strict=True))
    assert rows["slow"]["ttft_ratio"] == ratios[3]  # the median of the per-pass ratios
    assert (rows["slow"]["ttft_ratio_min"], rows["slow"]["ttft_ratio_max"]) == (ratios[0], ratios[-1])
    assert (rows["slow"]["vs_baseline"], rows["slow"]["p"]) == ("higher", 2 / 2**7)
    assert rows["close"]["vs_baseline"] == "within noise" and (
        rows["base"]["vs_baseline"],
        rows["base"]["p"],
    ) == (
        "baseline",
        None,
    )
    assert (rows["base"]["warm_cold_ratio"], rows["base"]["vs_cold"]) == (0.5, "lower")
    assert rows["slow"]["vs_cold"] == "within noise" and rows["close"]["vs_cold"] is None  # no cold runs
    assert rows["base"]["total_ttft_s_min"] == 10.0 and rows["base"]["total_ttft_s_max"] == 10.2
    notes = " ".join(spread_notes(list(rows.values())))
    assert "`slow` (higher, p = 0.016)" in notes and "within noise: `close`" in notes
    assert "too few" not in notes.split("sign test):")[1]
    two = [_record("base", 2, base[:2]), _record("slow", 2, slow[:2])]
    (_, short) = summarize_turns(two, "base")
    assert short["vs_baseline"] == "too few passes" and "too few passes to tell: `slow`" in " ".join(
        spread_notes([{"conversation": "base", "vs_baseline": "baseline"}, short])
    )


def test_contexts_cannot_break_a_markdown_table() -> None:
    context = "x = f(a)\n| `b` \\ c⟂\td"
    assert markdown_text(context) == "x = f(a)⏎\\| \\`b\\` \\\\ c⟂⇥d"
    lines = table([{"change_context": context, "first_change": 12}], ["change_context", "first_change"])
    lines = lines.splitlines()
    assert len(lines) == 3  # header, rule, one row: the newline did not split it
    assert len(re.findall(r"(?<!\\)\|", lines[2])) == 3  # only the cell separators are bare pipes


def test_rank_sum_of_independent_groups() -> None:
    right, wrong = [0.31, 0.42, 0.55, 0.47, 0.39, 0.61], [0.12, 0.22, 0.35, 0.18, 0.29, 0.22, 0.40]
    word, p = rank_sum(right, wrong)
    assert word == "higher" and p == pytest.approx(0.010025, abs=1e-5)  # scipy mannwhitneyu, asymptotic
    assert rank_sum(wrong, right)[0] == "lower"
    assert rank_sum([1.0] * 6, [1.0] * 6) == ("within noise", 1.0)
    assert rank_sum([0.1, 0.2], wrong) == ("too few values", None)
