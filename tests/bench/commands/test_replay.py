"""`python -m engine.bench replay TRACE`: divergence points of a user's own trace, replayed through the model
or analyzed without one (hosted rules, multi-session pressure)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import engine
from engine import devices
from engine.bench.__main__ import main
from engine.bench.harness.replayer import Conversation, Replayer, Request
from engine.errors import CacheCapacityError, ContextOverflowError, TraceError
from engine.kv import pool as kv_cache
from engine.kv.pool import DEFAULT_CACHE_TOKENS
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
    assert {r["conversation"] for r in data["requests"]} == {"fix-date-parser", str(billing)}
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


def test_a_session_id_never_writes_outside_results(tiny_dir, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    trace = tmp_path / "t.jsonl"
    hello = {"messages": [{"role": "user", "content": "hello"}]}
    trace.write_text(json.dumps({"session_id": "../../../../tmp/escaped", "body": hello}) + "\n")
    model = str(tiny_dir("qwen2", tokenizer=True))
    assert main(["replay", str(trace), "--analyze", "--rules", "local", "--model", model]) == 0
    (run,) = (tmp_path / "results").iterdir()
    assert run.name.startswith("replay-analyze_tmp_escaped-") and (run / "report.md").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results", "t.jsonl"]


def test_two_files_of_one_name_are_two_sessions(tiny_dir, tmp_path) -> None:
    """day1/trace.jsonl and day2/trace.jsonl: day 2's first request is its session's turn 1, not a changed
    system prompt in day 1's session."""
    turns = trace_turns()
    for day in ("day1", "day2"):
        (tmp_path / day).mkdir()
        (tmp_path / day / "trace.jsonl").write_text("\n".join(json.dumps(t) for t in turns[:2]) + "\n")
    days = [str(tmp_path / day / "trace.jsonl") for day in ("day1", "day2")]
    out, model = tmp_path / "out", str(tiny_dir("qwen2", tokenizer=True))
    assert main(["replay", *days, "--analyze", "--rules", "local", "--model", model, "--out", str(out)]) == 0
    rows = json.loads((out / "analysis.json").read_text())["requests"]
    assert [(r["conversation"], r["turn"]) for r in rows] == [
        (days[0], 1),
        (days[1], 1),
        (days[0], 2),
        (days[1], 2),
    ]
    assert rows[1]["first_change"] == -1 and rows[1]["cached_tokens"] > 0  # served from day 1's blocks
    with pytest.raises(TraceError, match="is given twice"):
        main(["replay", days[0], days[0], "--analyze", "--model", model, "--out", str(tmp_path / "twice")])


def test_analyze_sizes_the_cache_a_full_replay_gets_whatever_memory_is_free(
    tiny_dir, tmp_path, monkeypatch
) -> None:
    """Two runs of one command, with 8 GiB and then 1 GiB free: one default capacity, the engine's own."""
    model = str(tiny_dir("qwen2", tokenizer=True))
    sizes = []
    for free in (8 << 30, 1 << 30):
        for module in (devices, kv_cache):
            monkeypatch.setattr(module, "free_memory", lambda device, free=free: (free, "test memory"))
        out = tmp_path / f"free-{free}"
        main(
            [
                "replay",
                "example:anthropic",
                "--analyze",
                "--rules",
                "local",
                "--model",
                model,
                "--out",
                str(out),
            ]
        )
        sizes.append(json.loads((out / "analysis.json").read_text())["environment"]["cache_tokens"])
        assert engine.load(model, device="cpu").info["cache_tokens"] == sizes[-1]  # what a full replay gets
    assert sizes == [DEFAULT_CACHE_TOKENS] * 2


def test_analyze_counts_and_marks_requests_over_the_context(tiny_dir, tmp_path, capsys) -> None:
    """The tiny model's context is 8,192 tokens: a full replay refuses the long request, the analysis marks
    it, serves it nothing locally and counts it."""
    long = {"messages": [{"role": "user", "content": " ".join(["word"] * 9000)}]}
    short = {"messages": [{"role": "user", "content": "hello"}]}
    trace = tmp_path / "t.jsonl"
    trace.write_text("\n".join(json.dumps(b) for b in (long, short)) + "\n")
    model, out = str(tiny_dir("qwen2", tokenizer=True)), tmp_path / "out"
    assert (
        main(["replay", str(trace), "--analyze", "--rules", "local", "--model", model, "--out", str(out)])
        == 0
    )
    assert "1 of 2 requests do not fit the 8,192-token context" in capsys.readouterr().err
    data = json.loads((out / "analysis.json").read_text())
    assert data["environment"]["over_context_requests"] == 1
    first, second = data["requests"]
    assert first["local_why_none"].startswith("refused: needs 9,") and first["cached_tokens"] == 0
    assert second["local_why_none"] == ""
    assert "1 over it, which a full replay refuses" in (out / "report.md").read_text()
    with pytest.raises(ContextOverflowError, match="exceeds the model's context of 8192 tokens"):
        main(["replay", str(trace), "--model", model, "--repeats", "1", "--out", str(tmp_path / "full")])


def test_analyze_counts_and_marks_requests_over_the_local_cache(tiny_dir, tmp_path, capsys) -> None:
    """A request whose prompt the local cache (--cache-tokens) cannot hold, which a full replay refuses, is
    served nothing locally and counted; the analysis of the rest goes on (it ended on the cache's error)."""
    long = {"messages": [{"role": "user", "content": " ".join(["word"] * 3000)}]}
    short = {"messages": [{"role": "user", "content": "hello"}]}
    trace = tmp_path / "t.jsonl"
    trace.write_text("\n".join(json.dumps(b) for b in (long, short)) + "\n")
    model, out = str(tiny_dir("qwen2", tokenizer=True)), tmp_path / "out"
    argv = ["replay", str(trace), "--analyze", "--rules", "local", "--model", model, "--cache-tokens", "1024"]
    assert main([*argv, "--out", str(out)]) == 0
    assert "1 of 2 requests do not fit the local cache of 1,024 tokens" in capsys.readouterr().err
    data = json.loads((out / "analysis.json").read_text())
    assert data["environment"]["over_cache_requests"] == 1
    first, second = data["requests"]
    assert "over the local cache's 1,024" in first["local_why_none"] and first["cached_tokens"] == 0
    assert second["local_why_none"] == ""
    assert "1 need more than the local cache holds" in (out / "report.md").read_text()
    with pytest.raises(CacheCapacityError):
        main(
            [
                "replay",
                str(trace),
                "--model",
                model,
                "--cache-tokens",
                "1024",
                "--out",
                str(tmp_path / "full"),
            ]
        )
