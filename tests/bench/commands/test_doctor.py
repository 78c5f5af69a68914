"""`python -m engine.bench doctor`: on `bench layout`'s conversation written out under each breaking layout
it names the cause, and its rewrite recovers stable-first's cached share; on Claude Code's request from two
directories it names the memory path and the tools the template renders after it, and measures both fixes."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from engine.bench.__main__ import main
from engine.bench.workloads.layout_traces import write_layout_traces
from engine.bench.workloads.scenario import build_scenario
from engine.errors import InvalidArgumentError
from engine.loading.tokenizer import load_tokenizer, qwen_tokenizer_dir
from engine.traces.load import load_trace

FIXTURE = Path(__file__).parents[2] / "fixtures" / "agents" / "claude-code-request.json"
EXPECTED = {
    "timestamp-first": "clock",
    "dynamic-profile": "counter",
    "shuffled-tools": "reordered_list",
    "sliding-window": "truncated_history",
    "text-format": "re_rendered_history",
}


@pytest.fixture(scope="module")
def model(tiny_dir) -> str:
    return str(tiny_dir("qwen2", tokenizer=True))


@pytest.fixture(scope="module")
def layout_traces(tmp_path_factory) -> dict[str, Path]:
    sc = build_scenario(load_tokenizer(qwen_tokenizer_dir()), "small")
    return write_layout_traces(sc, ["stable-first", *EXPECTED], tmp_path_factory.mktemp("layouts"))


def doctor(trace: Path, model: str, out: Path, *flags: str) -> list[dict[str, str]]:
    assert main(["doctor", str(trace), "--model", model, "--out", str(out), *flags]) == 0
    with open(out / "causes.csv") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("layout", list(EXPECTED))
def test_each_layout_is_named_and_its_fix_recovers_stable_first(
    layout, layout_traces, model, tmp_path
) -> None:
    stable = doctor(layout_traces["stable-first"], model, tmp_path / "stable", "--provider", "local")
    assert stable == []  # nothing breaks
    rows = doctor(layout_traces[layout], model, tmp_path / "out", "--apply", str(tmp_path / "fixed.jsonl"))
    assert rows[0]["cause"] == EXPECTED[layout] and rows[0]["lines_missing"] == "0"
    # stable-first's share, from the same analysis (read back from its report's JSON)
    base = _local_share(layout_traces["stable-first"], model, tmp_path / "base")
    assert float(rows[0]["cached_share_after"]) >= 0.95 * base
    assert len(load_trace(tmp_path / "fixed.jsonl")) == len(load_trace(layout_traces[layout]))
    assert {"spans.csv", "report.md", "cached_share.png"} <= {p.name for p in (tmp_path / "out").iterdir()}


def _local_share(trace: Path, model: str, out: Path) -> float:
    assert (
        main(["replay", str(trace), "--analyze", "--model", model, "--out", str(out), "--rules", "local"])
        == 0
    )
    rules = json.loads((out / "analysis.json").read_text())["rules"]
    return next(r["cached_share"] for r in rules if r["rule"] == "local")


def test_claude_code_in_two_directories_names_the_memory_path_and_the_tool_order(tmp_path) -> None:
    model = "synthetic:qwen2.5-0.5b"  # Qwen's template and a 32k context: the request is 21k tokens
    body = json.loads(FIXTURE.read_text())["body"]
    moved = (
        json.dumps(body)
        .replace("capture-work", "capture-elsewhere")
        .replace("capture/work", "capture/elsewhere")
    )
    lines = [
        json.dumps({"timestamp": 1.0 + i, "session": s, "format": "anthropic", "body": b})
        for i, (s, b) in enumerate([("work", body), ("elsewhere", json.loads(moved))])
    ]
    trace = tmp_path / "claude-code.jsonl"
    trace.write_text("\n".join(lines) + "\n")
    rows = doctor(trace, model, tmp_path / "out", "--provider", "local")
    causes = {(r["cause"], r["region"]) for r in rows}
    assert {("path", "system"), ("tools_after_break", "tools")} <= causes
    with open(tmp_path / "out" / "spans.csv") as f:
        spans = list(csv.DictReader(f))
    path = next(s for s in spans if s["cause"] == "path")
    assert "capture-elsewhere/memory/" in path["after"] and int(path["token"]) > 0
    fixed = next(r for r in rows if r["cause"] == "path")
    assert float(fixed["cached_share_after"]) > 10 * float(fixed["cached_share_before"])
    # tools first, measured on the request from the other directory (an estimate said about 89%)
    tools_first = next(r for r in rows if r["cause"] == "tools_after_break")
    assert float(tools_first["broken_share_before"]) < 0.05 < 0.85 < float(tools_first["broken_share_after"])
    assert "on the requests it broke: 2% → 89%" in (tmp_path / "out" / "report.md").read_text()


def test_a_clock_line_in_a_tau_bench_like_prompt_is_named(model, tmp_path) -> None:
    """tau-bench's retail agent: its policy, with the current time, as each task's system prompt."""
    tau = (
        "# Retail agent policy\nAs a retail agent, you can help users cancel or modify pending orders, return "
        "or exchange delivered orders, modify their default user address, or provide information about "
        "their own profile, orders, and related products.\nThe current time is 2024-05-15 15:0{}:00 EST.\n"
        "You should not make up any information or knowledge or procedures not provided by the user or the "
        "tools, or give subjective recommendations or comments."
    )
    bodies = [
        {"messages": [{"role": "system", "content": tau.format(i)}, {"role": "user", "content": f"turn {i}"}]}
        for i in range(3)
    ]
    trace = tmp_path / "tau.jsonl"
    trace.write_text(
        "\n".join(json.dumps({"session": f"task-{i}", "body": b}) for i, b in enumerate(bodies)) + "\n"
    )
    rows = doctor(trace, model, tmp_path / "out", "--provider", "local")
    assert rows[0]["cause"] == "clock" and rows[0]["region"] == "system"


def test_measure_pairs_each_fix_with_the_original(model, tmp_path) -> None:
    from engine.traces.doctor.writing import write_trace
    from tests.traces.doctor.small_traces import clock_trace

    trace = tmp_path / "clock.jsonl"
    write_trace(trace, clock_trace(), [])
    rows = doctor(trace, model, tmp_path / "out", "--provider", "local", "--measure", "--repeats", "2")
    clock = rows[0]
    assert clock["cause"] == "clock"
    assert float(clock["ttft_ratio_min"]) <= float(clock["ttft_ratio"]) <= float(clock["ttft_ratio_max"])
    assert "TTFT" in (tmp_path / "out" / "report.md").read_text()


def test_replay_names_each_change_with_the_doctors_classifier(layout_traces, model, tmp_path) -> None:
    out = tmp_path / "replay"
    args = [
        "replay",
        str(layout_traces["timestamp-first"]),
        "--analyze",
        "--model",
        model,
        "--rules",
        "local",
    ]
    assert main([*args, "--out", str(out)]) == 0
    requests = json.loads((out / "analysis.json").read_text())["requests"]
    assert [r["change_cause"] for r in requests] == ["", "clock", "clock", "clock"]
    assert "(clock)" in (out / "report.md").read_text()


def test_layout_writes_its_conversation_as_traces_and_keeps_what_is_there(model, tmp_path) -> None:
    args = ["layout", "--write-traces", str(tmp_path), "--model", model, "--layouts", "stable-first"]
    assert main([*args, "timestamp-first"]) == 0
    assert len(load_trace(tmp_path / "timestamp-first.jsonl")) == 4  # the small scale's turns
    with pytest.raises(InvalidArgumentError, match="stable-first.jsonl exists"):
        main(args)


REAL = Path(__file__).resolve().parents[4] / "shared" / "traces" / "mini_swe_agent_astropy.traj.json"


@pytest.mark.skipif(not REAL.exists(), reason="the shared real traces are not next to this checkout")
def test_an_append_only_agent_gets_a_clean_bill(tmp_path) -> None:
    """mini-swe-agent only appends; DeepSeek's recorded reads fall one 64-token unit short of what was held
    (its granularity), which is not named an eviction."""
    rows = doctor(REAL, "synthetic:qwen2.5-0.5b", tmp_path / "out", "--provider", "deepseek")
    assert rows == []
    assert "No request broke its prefix" in (tmp_path / "out" / "report.md").read_text()
