"""`--record` through a chain of `previous_response_id` turns, each carrying a 50 KB reasoning item (Codex's
encrypted reasoning): the items no prompt renders are recorded as their digest, and the response store
keeps none of them (a 100-turn chain recorded 254 MB for a 1,608-token prompt)."""

from __future__ import annotations

import json
from pathlib import Path

from engine.serve.recorder import Recorder
from engine.traces.responses import parse_responses
from tests.redteam.conftest import MODEL, serve
from tests.redteam.hostile import post

REASONING = {"type": "reasoning", "summary": [], "encrypted_content": "x" * 50_000}


def test_a_chain_with_reasoning_items_is_recorded_bounded(tiny_engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    record = tmp_path / "record.jsonl"
    with serve(tiny_engine, recorder=Recorder(record), default_max_tokens=2) as server:
        previous = None
        for turn in range(10):
            items = [REASONING, {"type": "message", "role": "user", "content": f"turn {turn}"}]
            body = {"model": MODEL, "input": items, "max_output_tokens": 2}
            answer = post(
                server.url, "/v1/responses", body | ({"previous_response_id": previous} if previous else {})
            )
            assert answer.status == 200, answer.body[:300]
            previous = answer.json()["id"]
        kept = server.state.responses
        assert kept.bytes < 20_000  # ten conversations of ten short turns, no reasoning item kept
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert len(lines) == 10 and record.stat().st_size < 100_000  # ten 50 KB items: a digest each
    last = lines[-1]["body"]
    assert [i.get("type") for i in last["input"]].count("reasoning") == 1  # only the new input holds one
    assert "kvtestbed_digest" in last["input"][-2] and "encrypted_content" not in last["input"][-2]
    assert len(parse_responses(last).messages) == 19  # nine turns and their replies, the tenth: alone
