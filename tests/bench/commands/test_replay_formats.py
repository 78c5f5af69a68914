"""`bench replay <files> --analyze` on the files agents, proxies and tracers write, as a new user runs it:
one folder holding a Claude Code project, a Codex rollout, a claude-trace log, a HAR capture and an
OpenTelemetry export; the recorded-vs-predicted table and the miss-reason summary printed, per request
where each miss came from; and hash-id traces replayed through the block manager under pressure."""

from __future__ import annotations

import contextlib
import csv
import io
import json
from pathlib import Path

import pytest

from engine.bench.__main__ import main
from engine.errors import TraceError
from engine.traces.shipped import trace_path
from tests.traces.write_captures import claude_trace_log, har_file
from tests.traces.write_claude_code import claude_code_project
from tests.traces.write_codex import codex_rollout
from tests.traces.write_otel import otel_export

CACHE = ["--cache-tokens", "65536"]


def analyze(model: str, out: Path, *argv: str) -> str:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["replay", *argv, "--analyze", "--model", model, "--out", str(out), *CACHE]) == 0
    return printed.getvalue()


def rows(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def folder_run(tiny_dir, tmp_path_factory) -> tuple[str, Path]:
    root = tmp_path_factory.mktemp("formats")
    claude_code_project(root / "traces" / "claude")
    codex_rollout(root / "traces" / "codex" / "rollout-2026-11-30T09-00-00-1.jsonl")
    claude_trace_log(root / "traces" / "log-1.jsonl")
    har_file(root / "traces" / "capture.har")
    otel_export(root / "traces" / "spans.json")
    out = root / "out"
    return analyze(str(tiny_dir("qwen2", tokenizer=True)), out, str(root / "traces")), out


def misses(out: Path, session: str, cache: str) -> list[str]:
    """The miss reasons of a session's requests, in order ('' where none)."""
    return [r[f"{cache}_miss"] for r in rows(out / "requests.csv") if r["conversation"] == session]


def test_the_tables_are_printed(folder_run) -> None:
    printed, out = folder_run
    assert (
        "Recorded (provider) beside predicted (its rule):" in printed
        and "Where the misses came from:" in printed
    )
    assert (
        "Agreement per rule:" in printed and "**messages only**" in printed
    )  # Claude Code: no system, tools
    assert "not reported" in printed  # OpenAI's usage has no cache writes
    assert "skipped 2 captured requests" in printed and "transcript records" in printed
    agreement = {r["rule"] for r in rows(out / "agreement.csv")}
    assert agreement == {"local", "openai", "anthropic", "deepseek", "deepseek-2024", "gemini"}
    assert (out / "timeline-session-a.png").stat().st_size > 0
    report = (out / "report.md").read_text()
    assert "## Disagreements, recorded against predicted" in report
    assert "## Cache activity the trace cannot explain" in report and "unexplained reads: " in report


def test_claude_code_misses(folder_run) -> None:
    _, out = folder_run
    assert misses(out, "session-a", "recorded") == [
        "first_request",
        "",
        "ttl_expired",
        "",
        "messages_changed",
    ]
    assert misses(out, "session-a", "anthropic")[2] == "ttl_expired"  # the 7-minute gap, predicted too
    assert misses(out, "session-b", "recorded") == [""]  # the resumed session read what session A left
    split = [
        r["recorded_cache_write_1h_tokens"]
        for r in rows(out / "requests.csv")
        if r["conversation"] == "session-a"
    ]
    assert split[3] == "600"


def test_codex_capture_and_span_misses(folder_run) -> None:
    _, out = folder_run
    assert misses(out, "codex-1", "recorded") == ["first_request", "", "ttl_expired", "messages_changed"]
    assert misses(out, "codex-1", "openai")[2] == "ttl_expired"
    log, har = str(out.parent / "traces" / "log-1.jsonl"), str(out.parent / "traces" / "capture.har")
    assert misses(out, log, "recorded") == [
        "first_request",
        "",
        "",
        "ttl_expired",
    ]  # the side request: none; a capture is one session, keyed by its path
    assert misses(out, log, "anthropic")[3] == "ttl_expired"
    assert misses(out, "conv-9", "recorded") == ["first_request", "", "ttl_expired"]
    keys = {r["cache_key"] for r in rows(out / "requests.csv") if r["conversation"] == har}
    assert keys == {"acct-7"}


def test_a_claude_code_session_with_its_system_prompt_and_tools(tiny_dir, tmp_path: Path) -> None:
    project = claude_code_project(tmp_path / "project")
    (tmp_path / "system.txt").write_text("You are Claude Code, Anthropic's official CLI for Claude. " * 100)
    tools = [{"name": "Read", "description": "Read a file.", "input_schema": {"type": "object"}}]
    (tmp_path / "tools.json").write_text(json.dumps(tools))
    extra = ["--system-file", str(tmp_path / "system.txt"), "--tools-file", str(tmp_path / "tools.json")]
    model = str(tiny_dir("qwen2", tokenizer=True))
    printed = analyze(model, tmp_path / "out", str(project / "session-a.jsonl"), *extra)
    assert "messages only" not in printed
    # with the system prompt the first request is above the minimum: the second reads what it wrote
    assert misses(tmp_path / "out", "session-a", "anthropic") == [
        "first_request",
        "",
        "ttl_expired",
        "",
        "messages_changed",
    ]


def test_usage_only_spans(tiny_dir, tmp_path: Path) -> None:
    model = str(tiny_dir("qwen2", tokenizer=True))
    analyze(model, tmp_path / "out", str(otel_export(tmp_path / "s.json", content=False)))
    assert misses(tmp_path / "out", "conv-9", "recorded") == ["first_request", "", "ttl_expired"]
    assert "openai_miss" not in rows(tmp_path / "out" / "requests.csv")[0]  # nothing to predict from


def test_a_hash_id_trace_under_pressure(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    assert main(["replay", "example:mooncake", "--analyze", "--pressure", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "fewest-reuses" in printed and "agent_traffic.mooncake.jsonl" in printed
    points = rows(out / "pressure.csv")
    assert len(points) == 16 and float(points[-1]["hit_rate"]) > float(points[0]["hit_rate"])
    assert (out / "pressure-agent_traffic.mooncake.png").stat().st_size > 0


def test_two_hash_id_traces_of_one_name_are_two_traces(tmp_path: Path) -> None:
    """Each trace is labelled by its path: day1/t.jsonl and day2/t.jsonl get a row and a figure each."""
    example = trace_path("example:mooncake").read_text()
    for day in ("day1", "day2"):
        (tmp_path / day).mkdir()
        (tmp_path / day / "t.jsonl").write_text(example)
    names = [str(tmp_path / day / "t.jsonl") for day in ("day1", "day2")]
    out = tmp_path / "out"
    assert main(["replay", *names, "--analyze", "--pressure", "--out", str(out)]) == 0
    assert {r["trace"] for r in rows(out / "pressure.csv")} == set(names)
    assert (out / "pressure-t.png").is_file() and (out / "pressure-t-1.png").is_file()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["example:mooncake"], "analyze them alone, with --analyze"),
        (["example:mooncake", "example:anthropic", "--analyze"], "analyze them alone"),
        (["example:mooncake", "--analyze", "--rules", "openai"], "not --rules"),
        (["example:anthropic", "--analyze", "--system-file", "README.md"], "supply what Claude Code"),
    ],
)
def test_refusals(argv: list[str], message: str) -> None:
    with pytest.raises(TraceError, match=message):
        main(["replay", *argv])
