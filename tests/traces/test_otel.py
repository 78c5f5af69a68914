"""OpenTelemetry GenAI spans: inference spans taken (content, usage in current and deprecated spellings),
others counted; spans without content are usage-only requests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.errors import TraceError
from engine.traces.otel import read_otel
from tests.traces.write_otel import otel_export


def test_spans_with_content(tmp_path: Path) -> None:
    got = read_otel(otel_export(tmp_path / "spans.json"))
    assert got.notes == ["skipped 1 spans: 1 execute_tool"]
    first, second, third = got.requests
    assert {r.session for r in got.requests} == {"conv-9"} and third.timestamp - second.timestamp == 400
    assert [m["role"] for m in second.messages] == ["system", "user", "assistant", "tool"]
    assert second.messages[3]["content"] == json.dumps({"due": 120})
    assert second.tools[0]["function"]["name"] == "lookup" and second.missing == ()
    assert (second.recorded.prompt_tokens, second.recorded.cache_read_tokens) == (
        1600,
        1408,
    )  # deprecated names


def test_usage_only_spans_and_jsonl_exports(tmp_path: Path) -> None:
    doc = json.loads(otel_export(tmp_path / "a.json", content=False).read_text())
    path = tmp_path / "export.jsonl"
    path.write_text(json.dumps(doc) + "\n" + json.dumps(doc) + "\n")  # the collector's file exporter
    got = read_otel(path)
    assert len(got.requests) == 6 and all(
        r.messages == [] and r.missing == ("content",) for r in got.requests
    )
    assert got.requests[0].recorded.output_tokens == 20


def test_a_bad_attribute_names_the_span(tmp_path: Path) -> None:
    path = otel_export(tmp_path / "spans.json")
    doc = json.loads(path.read_text())
    span = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][1]
    attr = next(a for a in span["attributes"] if a["key"] == "gen_ai.input.messages")
    attr["value"]["stringValue"] = "[{"
    path.write_text(json.dumps(doc))
    with pytest.raises(
        TraceError, match=r"spans\[1\]: attributes\[gen_ai\.input\.messages\]: not valid JSON"
    ):
        read_otel(path)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda doc: doc.update(resourceSpans=5), r"line 1: resourceSpans: expected a list, got int"),
        (lambda doc: doc["resourceSpans"].__setitem__(0, "x"), r"resourceSpans\[0\]: expected dict"),
        (
            lambda doc: doc["resourceSpans"][0].update(scopeSpans={"spans": []}),
            r"resourceSpans\[0\]\.scopeSpans: expected a list",
        ),
        (
            lambda doc: doc["resourceSpans"][0]["scopeSpans"][0].update(spans=7),
            r"scopeSpans\[0\]\.spans: expected a list",
        ),
        (
            lambda doc: doc["resourceSpans"][0]["scopeSpans"][0]["spans"].__setitem__(0, None),
            r"spans\[0\]: span: expected dict",
        ),
    ],
)
def test_a_malformed_level_is_named_not_a_traceback(tmp_path: Path, change, named: str) -> None:
    """Each level of the export (resourceSpans, scopeSpans, spans) of the wrong type is one line naming it
    (resourceSpans: 5 was a TypeError traceback)."""
    path = otel_export(tmp_path / "spans.json")
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))
    with pytest.raises(TraceError, match=named):
        read_otel(path)
