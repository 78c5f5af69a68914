"""Hash-id traces: Mooncake's JSONL (milliseconds, 512-token blocks unless told) and the published
`{block_size, requests}` document; ids that do not cover the prompt are refused naming the line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.errors import TraceError
from engine.traces.mooncake import read_hash_trace
from engine.traces.shipped import EXAMPLES

ROWS = [
    {"timestamp": 0, "input_length": 1100, "output_length": 20, "hash_ids": [1, 2, 3]},
    {"timestamp": 2500, "input_length": 1024, "output_length": 20, "hash_ids": [1, 2]},
]


def test_mooncake_lines(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    trace = read_hash_trace(path)
    assert trace.block_size == 512 and [r.time_s for r in trace.requests] == [0.0, 2.5]
    assert trace.requests[0].hash_ids == (1, 2, 3)
    with pytest.raises(TraceError, match=r"line 1: hash_ids: 3 ids for 1,100 input tokens at 1024 per block"):
        read_hash_trace(path, 1024)  # a flag overrides the default block size; the ids must cover the prompt
    with pytest.raises(
        TraceError,
        match=r"\(expected 1\): give the trace's block size with --hash-block-size; these ids fit 367$",
    ):
        read_hash_trace(path, 2048)
    assert read_hash_trace(path, 513).block_size == 513


def test_the_published_document_layout(tmp_path: Path) -> None:
    path = tmp_path / "agent.json"
    doc = {"block_size": 64, "requests": [{"t": 1.5, "in": 130, "out": 9, "hash_ids": [7, 8, 9]}]}
    path.write_text(json.dumps(doc))
    trace = read_hash_trace(path)
    assert (
        trace.block_size == 64 and trace.requests[0].time_s == 1.5 and trace.requests[0].input_length == 130
    )


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (
            {"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": ["a"]},
            "hash_ids: expected non-negative integer ids",
        ),
        (
            {"timestamp": 0, "input_length": -1, "output_length": 1, "hash_ids": []},
            "input_length: expected a token count",
        ),
        ({"input_length": 10, "output_length": 1, "hash_ids": [1]}, "timestamp: expected a number"),
    ],
)
def test_refusals_name_the_line_and_field(tmp_path: Path, row: dict, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(ROWS[0]) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(TraceError, match=f"line 2: {message}"):
        read_hash_trace(path)


def test_the_shipped_example_reads() -> None:
    trace = read_hash_trace(EXAMPLES["mooncake"])
    assert len(trace.requests) > 100 and all(r.time_s >= 0 for r in trace.requests)
