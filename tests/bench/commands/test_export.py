"""`bench export TRACE --block-size N --out FILE`: the Mooncake export replays (`replay --analyze`) to the
source's cached tokens at that block size, request by request; hash-id traces re-blocked to a multiple of
their own block size equal the export of the same text at that size; refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.bench.__main__ import main
from engine.errors import EngineError
from engine.traces import hash_replay
from engine.traces.load import read_entries
from engine.traces.mooncake import coarser, read_hash_trace
from engine.traces.shipped import EXAMPLES

MODEL = "smollm2-135m"


def cross_session_source(tmp_path: Path) -> Path:
    """The shipped OpenAI session's six requests as six sessions: no request carries a reply of its own
    session (a Mooncake replay cannot reuse replies), yet each extends the prompts before it."""
    path = tmp_path / "source.jsonl"
    entries = read_entries(EXAMPLES["openai-chat"])
    path.write_text("".join(json.dumps(e | {"session_id": f"s{i}"}) + "\n" for i, e in enumerate(entries)))
    return path


def export(source: str, out: Path, *flags: str) -> Path:
    assert main(["export", source, "--model", MODEL, "--out", str(out), *flags]) == 0
    return out


def analyzed(trace: str, out: Path, *flags: str) -> list[int]:
    """Cached tokens per request from `replay --analyze` (the local cache, nothing evicted)."""
    assert main(["replay", trace, "--analyze", "--model", MODEL, "--out", str(out), *flags]) == 0
    return [r["cached_tokens"] for r in json.loads((out / "analysis.json").read_text())["requests"]]


@pytest.mark.parametrize("block", [16, 32])
def test_the_export_replays_to_the_source_s_cached_tokens(tmp_path, block: int) -> None:
    source = str(cross_session_source(tmp_path))
    exported = export(source, tmp_path / "trace.jsonl", "--block-size", str(block))
    lines = [json.loads(line) for line in exported.read_text().splitlines()]
    assert len(lines) == 6 and lines[0]["timestamp"] == 0
    assert all(len(x["hash_ids"]) == -(-x["input_length"] // block) for x in lines)
    want = analyzed(source, tmp_path / "a", "--block-size", str(block), "--rules", "local")
    got = analyzed(str(exported), tmp_path / "b", "--hash-block-size", str(block))
    assert got == want and sum(want) > 0 and want[0] == 0


def test_re_blocked_hash_ids_equal_the_text_exported_at_that_size(tmp_path) -> None:
    source = str(cross_session_source(tmp_path))
    fine = read_hash_trace(export(source, tmp_path / "16.jsonl", "--block-size", "16"), 16)
    wide = read_hash_trace(export(source, tmp_path / "48.jsonl", "--block-size", "48"), 48)
    regrouped = coarser(fine, 48)
    assert [r.input_length for r in regrouped.requests] == [r.input_length for r in wide.requests]
    cached = [[s.cached_tokens for s in hash_replay.replay(t, 10_000)] for t in (regrouped, wide)]
    assert cached[0] == cached[1] and sum(cached[0]) > 0
    # a shipped hash-id trace at its own block size: the same trace
    again = read_hash_trace(export("example:mooncake", tmp_path / "m.jsonl"), 512)
    assert again.requests[5].hash_ids == read_hash_trace(EXAMPLES["mooncake"]).requests[5].hash_ids


def test_refusals(tmp_path) -> None:
    with pytest.raises(EngineError, match="only be exported at a multiple of 512"):
        export("example:mooncake", tmp_path / "x.jsonl", "--block-size", "100")
    taken = tmp_path / "taken.jsonl"
    taken.write_text("mine\n")
    with pytest.raises(EngineError, match="exists .pass --overwrite"):
        export("example:mooncake", taken)
    assert taken.read_text() == "mine\n"
