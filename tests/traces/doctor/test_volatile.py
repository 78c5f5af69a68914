"""The text classifier: what kind of value changed, from its two renderings."""

from __future__ import annotations

import pytest

from engine.traces.doctor.spans import text_spans
from engine.traces.doctor.volatile import CLOCK, COUNTER, ID, PATH, REORDERED, UNKNOWN, text_kind


@pytest.mark.parametrize(
    ("before", "after", "kind"),
    [
        ("09:05:12", "09:08:33", CLOCK),
        ("2026-11-30", "2026-12-01", CLOCK),
        ("Tuesday", "Wednesday", CLOCK),
        ("1764660000", "1764660300", CLOCK),
        ("/tmp/a/work/memory/", "/tmp/a/elsewhere/memory/", PATH),
        ("C:\\Users\\ann\\app", "C:\\Users\\bob\\app", PATH),
        ("cch=8dc1a;", "cch=ff03b;", ID),
        ("00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000002", ID),
        ("3f2a9b01c7d4", "9c0e0e7784f6", ID),
        ("500", "493", COUNTER),
        ("a\nb\nc", "c\na\nb", REORDERED),
        ("hello", "world", UNKNOWN),
        ("Monroe", "Madison", UNKNOWN),
    ],
)
def test_kinds(before, after, kind) -> None:
    assert text_kind(before, after) == kind


def test_spans_are_whole_words_and_reordered_lines_are_one_span() -> None:
    spans, more = text_spans("time 09:00:12 UTC\nrules", "time 09:03:44 UTC\nrules")
    assert [(s.before, s.after, s.char) for s in spans] == [("09:00:12", "09:03:44", 5)] and more == 0
    spans, _ = text_spans("x\nget\ntrack\nrefund\ny", "x\ntrack\nrefund\nget\ny")
    assert [(s.before, s.after) for s in spans] == [("get\ntrack\nrefund", "track\nrefund\nget")]
