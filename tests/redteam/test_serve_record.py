"""`--record` through a chain of `previous_response_id` turns, each carrying a 50 KB reasoning item (Codex's
encrypted reasoning): each line records only the turn's new input (the items no prompt renders as their
digest) and a reference to the response it continues, the response store keeps none of the unrendered items,
and the reader rebuilds every turn's whole conversation from the file (a 100-turn chain recorded 254 MB for a
1,608-token prompt: each turn re-recorded the whole conversation)."""

from __future__ import annotations

import json
from pathlib import Path

from engine.serve.recorder import Recorder
from engine.traces.load import load_trace
from tests.redteam.conftest import MODEL, serve
from tests.redteam.hostile import post

REASONING = {"type": "reasoning", "summary": [], "encrypted_content": "x" * 50_000}


def test_a_chain_with_reasoning_items_is_recorded_linearly(tiny_engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    record = tmp_path / "record.jsonl"
    with serve(tiny_engine, recorder=Recorder(record), default_max_tokens=2) as server:
        previous = None
        for turn in range(30):
            items = [REASONING, {"type": "message", "role": "user", "content": f"turn {turn}"}]
            body = {"model": MODEL, "input": items, "max_output_tokens": 2}
            answer = post(
                server.url, "/v1/responses", body | ({"previous_response_id": previous} if previous else {})
            )
            assert answer.status == 200, answer.body[:300]
            previous = answer.json()["id"]
        kept = server.state.responses
        assert (
            kept.bytes < 150_000
        )  # thirty conversations of up to thirty short turns, no reasoning item kept
    lines = record.read_text().splitlines()
    # a 50 KB item: a digest; no turn re-records the chain (the 30th would hold 29 turns of ~250 bytes); what
    # grows is `as_sampled`, one short reference per earlier reply the server rendered as sampled (~75 bytes)
    as_sampled = [len(json.dumps(json.loads(line).get("as_sampled", []))) for line in lines]
    sizes = [len(line.encode()) - grown for line, grown in zip(lines, as_sampled, strict=True)]
    assert len(lines) == 30 and max(sizes) < 4_000 and max(as_sampled) < 30 * 100
    last = json.loads(lines[-1])
    assert last["body"]["previous_response_id"] == last["continues"]["id"] and len(last["body"]["input"]) == 2
    assert "kvtestbed_digest" in last["body"]["input"][0] and "encrypted_content" not in lines[-1]
    assert len(load_trace(record)[-1].messages) == 59  # 29 turns and their replies, the 30th: rebuilt whole
