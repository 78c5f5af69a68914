"""scripts/agents_cache.py without npm or a server: a request's row from the live page's entry (where its
prompt broke, the tool-definition tokens after that point, the tools-first estimate) and the report."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
from agents_cache import main, opening, report, row  # noqa: E402

TOOLS = [{"name": "Read", "input_schema": {"type": "object"}}]
REGIONS = [
    ["system", "system", 0, 300],
    ["tools", "tools", 300, 1000],
    ["latest user", "message", 1000, 1040],
]


def entry(at: int | None, cached: int, previous: str | None = "req-1") -> dict:
    divergence = None if at is None else {"token": at, "region": "system", "text": "a\n  path ⟂ b"}
    return {
        "request_id": "req-2",
        "previous_request_id": previous,
        "api": "anthropic",
        "block_size": 16,
        "prompt_tokens": 1040,
        "cached_tokens": cached,
        "miss_reason": None if at is None else "system_changed",
        "divergence": divergence,
        "regions": REGIONS,
    }


def test_a_break_in_the_system_text_before_the_same_tools_estimates_what_tools_first_would_serve() -> None:
    r = row("claude-code", "B1", 1, entry(250, 240), {"tools": TOOLS}, {"req-1": {"tools": TOOLS}})
    assert (r.break_token, r.break_region, r.miss_reason) == (250, "system", "system_changed")
    assert r.tool_tokens_after_break == 700 and r.tools_first_cached == (250 + 700) // 16 * 16
    assert r.break_text == "a path ⟂ b" and round(r.share, 3) == round(240 / 1040, 3)


def test_no_estimate_when_the_tools_differ_or_the_break_is_after_them_or_there_is_none() -> None:
    other = {"req-1": {"tools": TOOLS + [{"name": "Bash"}]}}
    assert row("c", "B1", 1, entry(250, 240), {"tools": TOOLS}, other).tools_first_cached is None
    late = row("c", "B1", 1, entry(1010, 1008), {"tools": TOOLS}, {"req-1": {"tools": TOOLS}})
    assert late.tool_tokens_after_break == 0 and late.tools_first_cached is None
    hit = row("c", "A2", 1, entry(None, 1024), {"tools": TOOLS}, {"req-1": {"tools": TOOLS}})
    assert hit.miss_reason == "hit" and hit.break_token is None and hit.tools_first_cached is None


def test_the_report_sums_each_run_and_states_the_estimate() -> None:
    rows = [
        row("claude-code", "A1", 1, entry(None, 0, None) | {"miss_reason": "first_request"}, {}, {}),
        row("claude-code", "B1", 1, entry(250, 240), {"tools": TOOLS}, {"req-1": {"tools": TOOLS}}),
    ]
    text = report(rows, ["server: x"])
    assert "claude-code A1: 1 requests, 0 of 1,040 prompt tokens cached (0%)" in text
    assert "claude-code B1: 1 requests, 240 of 1,040 prompt tokens cached (23%)" in text
    assert "cached 240 in Qwen's order, about 944 with tools first" in text


def test_an_earlier_report_is_replaced_only_when_asked(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "report.md").write_text("mine")
    with pytest.raises(SystemExit) as e:
        main(["--out", str(tmp_path), "--no-install"])
    assert e.value.code == 2 and "pass --overwrite" in capsys.readouterr().err
    assert (tmp_path / "report.md").read_text() == "mine"


def test_a_work_folder_holding_the_users_files_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    (tmp_path / "w" / "codex").mkdir(parents=True)
    (tmp_path / "w" / "codex" / "keep.txt").write_text("the user's")
    with pytest.raises(SystemExit) as e:
        main(
            [
                "--clients",
                "codex",
                "--out",
                str(tmp_path / "o"),
                "--work",
                str(tmp_path / "w"),
                "--no-install",
            ]
        )
    assert e.value.code == 2 and "--work:" in capsys.readouterr().err
    assert (tmp_path / "w" / "codex" / "keep.txt").read_text() == "the user's"


def test_the_report_opens_with_its_model_commit_and_the_load() -> None:
    """As every result's report: the commit (this checkout's), and whether the machine was quiet."""
    from engine.bench.reporting.results import git_commit

    lines = opening("synthetic:qwen2.5-0.5b")
    assert lines[0] == "# Claude Code and Codex through the prefix cache: `synthetic:qwen2.5-0.5b`"
    assert any(line.startswith(f"- commit `{git_commit()}`, ") for line in lines), lines
    started = next(line for line in lines if line.startswith("- load average when it started "))
    assert started.endswith(("quiet", "**busy: its timings are not a reference**"))
    assert any(line.startswith("- load average when it ended ") for line in lines)
