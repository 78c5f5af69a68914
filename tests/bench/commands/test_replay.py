"""`python -m engine.bench replay TRACE`: divergence points of a user's own trace, replayed through the model
or analyzed without one (hosted rules, multi-session pressure)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import engine
from engine.bench.__main__ import main
from engine.bench.harness.replayer import Conversation, Replayer, Request
from engine.errors import CacheCapacityError, TraceError
from engine.kv import pool as kv_cache
from engine.traces.analysis import replies
from engine.traces.load import load_trace
from engine.traces.shipped import EXAMPLES
from tests.traces.billing_trace import trace_turns


@pytest.fixture(scope="module")
def records(tiny_dir, tmp_path_factory):
    path = tmp_path_factory.mktemp("trace") / "trace.json"
    path.write_text(json.dumps(trace_turns()))
    trace = load_trace(path)
    requests, following = [Request(r.messages, r.tools) for r in trace], replies(trace)
    e = engine.load(str(tiny_dir("qwen2", tokenizer=True)), device="cpu", cache_tokens=8192)
    conv = Conversation("trace", lambda t, _: requests[t], lambda t: following[t])
    return e, Replayer(e, repeats=1, cold=False).run([conv], 4)


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
    header = proc.stdout.splitlines()[0]
    assert "first_divergence" in header and "first_change" in header  # token indices of both points
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


@pytest.mark.parametrize("fmt", [f for f in EXAMPLES if f != "mooncake"])  # hash ids: test_replay_formats
def test_analyze_every_shipped_example(tiny_dir, tmp_path, capsys, fmt: str) -> None:
    out = tmp_path / fmt
    model = str(tiny_dir("qwen2", tokenizer=True))
    assert main(["replay", f"example:{fmt}", "--analyze", "--model", model, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "09:⟂11 UTC" in printed  # request 6's refreshed clock line is named
    rules = {row.split(",")[0] for row in (out / "rules.csv").read_text().splitlines()[1:]}
    assert rules == {"local", "openai", "anthropic", "deepseek", "deepseek-2024", "gemini"}
    for name in ("analysis.json", "requests.csv", "report.md", "cached_share_by_rule.png", "token_strip.png"):
        assert (out / name).stat().st_size > 0
    assert "## What changed where reuse was lost" in (out / "report.md").read_text()


def test_analyze_sizes_a_cache_larger_than_this_machine_without_allocating_it(
    tiny_dir, tmp_path, monkeypatch
) -> None:
    """--analyze allocates no K/V: a cache larger than the memory left is a valid what-if there, while a
    real replay refuses it before loading."""
    monkeypatch.setattr(kv_cache, "free_memory", lambda device: (2**20, "test memory"))
    model = str(tiny_dir("qwen2", tokenizer=True))
    argv = ["replay", "example:anthropic", "--model", model, "--cache-tokens", "100000"]
    assert main([*argv, "--analyze", "--out", str(tmp_path / "run")]) == 0
    data = json.loads((tmp_path / "run" / "analysis.json").read_text())
    assert data["environment"]["cache_tokens"] == 100000
    with pytest.raises(CacheCapacityError, match="of test memory is left"):
        main([*argv, "--out", str(tmp_path / "full")])


def test_analyze_several_sessions_under_pressure(tiny_dir, tmp_path) -> None:
    billing = tmp_path / "billing.json"
    billing.write_text(json.dumps(trace_turns()))
    out, model = tmp_path / "out", str(tiny_dir("qwen2", tokenizer=True))
    args = ["replay", "example:openai-chat", str(billing), "--analyze", "--pressure", "--rules", "openai"]
    assert main([*args, "--model", model, "--out", str(out), "--cache-tokens", "4096"]) == 0
    data = json.loads((out / "analysis.json").read_text())
    assert {r["conversation"] for r in data["requests"]} == {"fix-date-parser", "billing"}
    assert {p["policy"] for p in data["pressure"]} == {"lru", "fewest-reuses"}
    assert max(p["cache_tokens"] for p in data["pressure"]) == 4096 and (out / "pressure.png").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["example:anthropic", "--rules", "openai"], "add --analyze"),
        (["example:anthropic", "BILLING"], "a full replay takes one session"),
        (["example:xml"], "no shipped example"),
        (["example:anthropic", "--analyze", "--rules", "azure"], "unknown cache rule"),
    ],
)
def test_refusals(tiny_dir, tmp_path, argv: list[str], message: str) -> None:
    billing = tmp_path / "billing.json"
    billing.write_text(json.dumps(trace_turns()))
    argv = [str(billing) if a == "BILLING" else a for a in argv]
    with pytest.raises(TraceError, match=message):
        main(["replay", *argv, "--model", str(tiny_dir("qwen2", tokenizer=True))])
