"""`python -m engine.bench replay TRACE.json`: divergence points of a user's own trace."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import engine
from engine.bench.commands.replay import load_trace
from engine.bench.machinery.replayer import Conversation, Replayer
from tests.traces.billing_trace import trace_turns


@pytest.fixture(scope="module")
def records(tiny_dir, tmp_path_factory):
    path = tmp_path_factory.mktemp("trace") / "trace.json"
    path.write_text(json.dumps(trace_turns()))
    requests = load_trace(path)
    e = engine.load(str(tiny_dir("qwen2", tokenizer=True)), device="cpu", cache_tokens=8192)

    def reply(t: int):
        n = len(requests[t].messages)
        following = requests[t + 1].messages if t + 1 < len(requests) else []
        return following[n] if len(following) > n and following[n]["role"] == "assistant" else None

    return e, Replayer(e, repeats=1, cold=False).run(
        [Conversation("trace", lambda t, _: requests[t], reply)], 4
    )


def test_appending_turns_only_extend(records) -> None:
    _, recs = records
    assert recs[1].first_change == -1 and recs[2].first_change == -1
    assert recs[1].cached_share > 0.8 and recs[2].cached_share > 0.8


def test_a_reply_from_the_trace_is_reused_as_if_generated(records) -> None:
    _, recs = records
    # turn 3 carries turn 2's reply: the reply's blocks were published, so reuse reaches past it
    reply_region = next(start for label, start, _ in recs[2].regions if label == "assistant #4")
    assert recs[2].cached_tokens > reply_region


def test_a_changed_system_prompt_is_located(records) -> None:
    _, recs = records
    r = recs[3]
    assert r.change_region == "system" and "payments" in r.change_context.split("⟂")[1][:12]
    assert r.cached_tokens == r.first_change // 16 * 16 and r.cached_share < 0.1


def test_replay_command_end_to_end(tiny_dir, tmp_path) -> None:
    trace = tmp_path / "mytrace.json"
    trace.write_text(json.dumps(trace_turns()))
    out = tmp_path / "out"
    cmd = [
        sys.executable,
        "-m",
        "engine.bench",
        "replay",
        str(trace),
        "--model",
        str(tiny_dir("qwen2", tokenizer=True)),
        "--repeats",
        "1",
        "--out",
        str(out),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "payments" in proc.stdout  # the table names what changed on request 4
    for name in (
        "turns.json",
        "turns.csv",
        "summary.csv",
        "report.md",
        "ttft_per_turn.png",
        "token_strip.png",
    ):
        assert (out / name).stat().st_size > 0
    data = json.loads((out / "turns.json").read_text())
    assert data["environment"]["weights_digest"] and len(data["turns"]) == 4
    missing = subprocess.run(
        [sys.executable, "-m", "engine.bench", "replay", str(tmp_path / "nope.json")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (
        missing.returncode == 2
        and missing.stderr.strip().startswith("error:")
        and "Traceback" not in missing.stderr
    )
