"""`bench doctor` on the causes it cannot rewrite away inside the requests: the provider's TTL (the longer
retention and the keep-alive each measured by the Anthropic rule, with their cost, and the trace's gaps) and
a model swap (what it costs, measured); a per-request nonce made per-session, the originals named."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from engine.bench.__main__ import main

POLICY = "\n".join(
    f"Rule {n}: check the order number and the customer's name before step {n}." for n in range(90)
)


@pytest.fixture(scope="module")
def model(tiny_dir) -> str:
    return str(tiny_dir("qwen2", tokenizer=True))


def doctor(trace: Path, model: str, out: Path, *flags: str) -> dict[str, dict[str, str]]:
    assert main(["doctor", str(trace), "--model", model, "--out", str(out), *flags]) == 0
    with open(out / "causes.csv") as f:
        return {f"{r['cause']} {r['rewrite']}": r for r in csv.DictReader(f)}


def anthropic_trace(path: Path, times: list[float], system: list[str] | None = None) -> Path:
    lines, history = [], []
    for t, at in enumerate(times):
        history.append({"role": "user", "content": f"question {t}"})
        text = system[t] if system else POLICY
        body = {
            "model": "claude-sonnet-4-5",
            "system": [{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}],
            "messages": list(history),
        }
        lines.append(json.dumps({"timestamp": at, "session_id": "s", "body": body}))
        history.append({"role": "assistant", "content": f"answer {t}"})
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_ttl_gets_the_longer_retention_and_keep_alive_each_with_its_cost(model, tmp_path) -> None:
    trace = anthropic_trace(tmp_path / "gaps.jsonl", [0.0, 600.0, 1200.0])
    rows = doctor(trace, model, tmp_path / "out", "--provider", "anthropic")
    longer, alive = rows["ttl_or_eviction longer_ttl"], rows["ttl_or_eviction keep_alive"]
    before = float(longer["anthropic_cached_share_before"])
    assert before < 0.1 < float(longer["anthropic_cached_share_after"])
    assert float(alive["anthropic_cached_share_after"]) > before
    # the 1-hour writes cost 2x, the copies are paid: neither is free
    cost = float(longer["anthropic_cost_before"])
    assert float(longer["anthropic_cost_after"]) < cost and float(alive["anthropic_cost_after"]) < cost
    report = (tmp_path / "out" / "report.md").read_text()
    assert "2 of 2 gaps between a session's requests are over 5 min (longest 10.0 min; 0 over 1 h)" in report


def test_a_model_swap_is_not_rewritten_and_its_cost_is_measured(model, tmp_path) -> None:
    trace = anthropic_trace(tmp_path / "swap.jsonl", [0.0, 10.0, 20.0])
    lines = [json.loads(x) for x in trace.read_text().splitlines()]
    for x in lines[1:]:
        x["body"]["model"] = "claude-opus-4-1"
    trace.write_text("".join(json.dumps(x) + "\n" for x in lines))
    rows = doctor(
        trace, model, tmp_path / "out", "--provider", "anthropic", "--apply", str(tmp_path / "w.jsonl")
    )
    swap = rows["model_or_system_swap without_swap"]
    assert float(swap["anthropic_cached_share_after"]) > float(swap["anthropic_cached_share_before"])
    assert "not rewritten" in (tmp_path / "out" / "report.md").read_text()
    written = [json.loads(x)["body"]["model"] for x in (tmp_path / "w.jsonl").read_text().splitlines()]
    assert written == ["claude-sonnet-4-5", "claude-opus-4-1", "claude-opus-4-1"]  # never applied


def test_a_per_request_nonce_is_made_per_session_and_the_originals_named(model, tmp_path) -> None:
    nonces = ["a3f9c2e1", "7b0d44fe", "c81e9a07"]
    system = [f"x-anthropic-billing-header: cc_version=2.0.14; cch={n};\n{POLICY}" for n in nonces]
    trace = anthropic_trace(tmp_path / "nonce.jsonl", [0.0, 10.0, 20.0], system)
    rows = doctor(trace, model, tmp_path / "out", "--provider", "anthropic")
    row = rows["id_nonce per_session_nonce"]
    assert row["lines_missing"] == "0" and float(row["anthropic_cached_share_after"]) > 0.5
    report = (tmp_path / "out" / "report.md").read_text()
    assert "original nonces per request: 1 `cch=a3f9c2e1;`, 2 `cch=7b0d44fe;`, 3 `cch=c81e9a07;`" in report
