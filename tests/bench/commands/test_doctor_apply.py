"""`bench doctor --apply OUT`: the rewritten trace in the format it was read from, read back by `bench
replay --analyze` to the rewritten prompts (the prompt tokens and local cached share the doctor measured for
the rewrite); formats whose writer the doctor does not have refused by name."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from engine.bench.__main__ import main
from engine.errors import InvalidArgumentError
from engine.traces.load import load_trace
from engine.traces.shipped import EXAMPLES
from tests.traces.write_codex import codex_rollout


@pytest.fixture(scope="module")
def model(tiny_dir) -> str:
    return str(tiny_dir("qwen2", tokenizer=True))


def doctor_apply(trace: Path | str, model: str, tmp_path: Path) -> tuple[dict[str, dict[str, str]], Path]:
    """The causes.csv rows by cause, and the written trace."""
    out, written = tmp_path / "doctor", tmp_path / "fixed.jsonl"
    args = ["doctor", str(trace), "--model", model, "--provider", "local", "--out", str(out)]
    assert main([*args, "--apply", str(written)]) == 0
    with open(out / "causes.csv") as f:
        return {r["cause"]: r for r in csv.DictReader(f)}, written


def replayed(trace: Path, model: str, out: Path) -> tuple[int, float]:
    """`replay --analyze`'s prompt tokens over the trace and its local cached share."""
    args = ["replay", str(trace), "--analyze", "--model", model, "--rules", "local", "--out", str(out)]
    assert main(args) == 0
    analysis = json.loads((out / "analysis.json").read_text())
    share = next(r["cached_share"] for r in analysis["rules"] if r["rule"] == "local")
    return sum(r["prompt_tokens"] for r in analysis["requests"]), share


def assert_reads_back(row: dict[str, str], written: Path, model: str, out: Path) -> None:
    tokens, share = replayed(written, model, out)
    assert tokens == int(row["prompt_tokens_after"])
    assert share == pytest.approx(float(row["cached_share_after"]), abs=5e-4)


@pytest.mark.parametrize("fmt", ["openai-chat", "openai-responses", "anthropic"])
def test_a_rewritten_trace_is_written_in_its_own_format_and_read_back(fmt, model, tmp_path) -> None:
    """The shipped example session refreshes the clock at the top of its system prompt on request 6."""
    rows, written = doctor_apply(f"example:{fmt}", model, tmp_path)
    assert rows["clock"]["lines_missing"] == "0"
    lines = [json.loads(x) for x in written.read_text().splitlines()]
    assert {x["format"] for x in lines} == {fmt}
    requests = load_trace(written)
    assert all("UTC" not in r.messages[0]["content"] for r in requests)  # the clock left the system prompt
    # Anthropic's API puts the tools first already: its body carries the clock's rewrite alone
    row = rows["clock"] if fmt == "anthropic" else rows["all fixes"]
    assert_reads_back(row, written, model, tmp_path / "replay")


def test_the_servers_record_is_written_as_its_envelopes_without_its_reports(model, tmp_path) -> None:
    record = tmp_path / "record.jsonl"
    lines = [json.loads(x) for x in EXAMPLES["openai-chat"].read_text().splitlines()]
    usage = {"prompt_tokens": 100, "completion_tokens": 5}
    record.write_text(
        "".join(
            json.dumps(x | {"format": "openai-chat", "usage": usage, "kvtestbed": {"model": "m"}}) + "\n"
            for x in lines
        )
    )
    rows, written = doctor_apply(record, model, tmp_path)
    entries = [json.loads(x) for x in written.read_text().splitlines()]
    assert len(entries) == len(lines) and not any("usage" in e or "kvtestbed" in e for e in entries)
    assert_reads_back(rows["all fixes"], written, model, tmp_path / "replay")


def test_a_mini_swe_agent_trajectory_is_written_as_a_trajectory(model, tmp_path) -> None:
    def reply(n: int) -> dict:
        response = {"created": 1_800_000_000 + n, "model": "m", "usage": {"prompt_tokens": 9}}
        return {
            "role": "assistant",
            "content": f"THOUGHT {n}\n```bash\nls\n```",
            "extra": {"response": response},
        }

    messages = [{"role": "system", "content": "You are a helpful assistant."}]
    for n in range(3):
        messages += [{"role": "user", "content": f"observation {n}"}, reply(n)]
    doc = {"trajectory_format": "mini-swe-agent-1", "instance_id": "task-1", "messages": messages}
    doc["messages"].append({"role": "exit", "content": "submitted"})
    trace = tmp_path / "task.traj.json"
    trace.write_text(json.dumps(doc))
    _, written = doctor_apply(trace, model, tmp_path)
    back, original = load_trace(written), load_trace(trace)
    assert [r.messages for r in back] == [r.messages for r in original]
    assert [r.timestamp for r in back] == [r.timestamp for r in original]
    assert all(r.recorded is None for r in back)  # the usage described the original requests
    assert json.loads(written.read_text())["messages"][-1]["role"] == "exit"


def test_a_format_without_a_writer_is_refused_by_name(model, tmp_path) -> None:
    trace = codex_rollout(tmp_path / "rollout.jsonl")
    args = ["doctor", str(trace), "--model", model, "--out", str(tmp_path / "o"), "--apply", "x.jsonl"]
    with pytest.raises(InvalidArgumentError, match="Codex rollouts .* are not written"):
        main(args)
