"""The reading every file-level reader shares: JSON lines and documents with a lone surrogate refused naming
the file, the line and the field; times finite, UTC where they give no offset."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from engine.errors import TraceError
from engine.traces.fields import FieldError
from engine.traces.records import json_document, json_lines, seconds


def test_a_lone_surrogate_names_file_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    bad = json.dumps({"message": {"content": [{"type": "text", "text": "a\ud800"}]}})
    path.write_text(json.dumps({"type": "user"}) + "\n" + bad + "\n")
    with pytest.raises(
        TraceError,
        match=r"session\.jsonl: line 2: message\.content\[0\]\.text: holds a lone surrogate '\\ud800' at character 1",
    ):
        json_lines(path)
    doc = tmp_path / "spans.json"
    doc.write_text(json.dumps({"resourceSpans": [{"name": "\udc00"}]}))
    with pytest.raises(TraceError, match=r"spans\.json: resourceSpans\[0\]\.name: holds a lone surrogate"):
        json_document(doc)


def test_times_are_finite_and_utc_without_an_offset() -> None:
    assert seconds("2026-11-30T09:00:00", "t") == seconds("2026-11-30T09:00:00Z", "t") == 1796029200.0
    assert seconds("1796029200000", "t", 1e-3) == pytest.approx(1796029200.0)
    for value in (math.nan, math.inf):
        with pytest.raises(FieldError, match=r"t: expected a finite number of seconds"):
            seconds(value, "t")
    with pytest.raises(FieldError, match=r"t: expected seconds or an ISO 8601 time"):
        seconds("yesterday", "t")
