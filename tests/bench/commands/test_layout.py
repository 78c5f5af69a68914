"""`python -m engine.bench layout` end to end on a tiny model: files, summary, environment record."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

from engine.devices import dtype_name


def test_layout_command_writes_every_output(tiny_dir, tmp_path, device, dtype) -> None:
    out = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "engine.bench",
        "layout",
        "--model",
        str(tiny_dir("qwen2", tokenizer=True)),
        "--layouts",
        "timestamp-first",
        "stable-first",
        "--turns",
        "3",
        "--repeats",
        "2",
        "--out",
        str(out),
        "--device",
        str(device),
        "--dtype",
        dtype_name(dtype),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    for name in (
        "turns.json",
        "turns.csv",
        "summary.csv",
        "report.md",
        "ttft_per_turn.png",
        "cached_share.png",
        "token_strip.png",
    ):
        assert (out / name).stat().st_size > 0, name
    summary = {row["conversation"]: row for row in csv.DictReader((out / "summary.csv").open())}
    assert float(summary["stable-first"]["ttft_ratio"]) == 1.0  # the baseline comes first, whatever the order
    assert float(summary["stable-first"]["cached_share"]) > float(summary["timestamp-first"]["cached_share"])
    data = json.loads((out / "turns.json").read_text())
    env = data["environment"]
    assert {"model", "weights_digest", "dtype", "device", "torch", "commit"} <= env.keys()
    assert (env["device"], env["dtype"]) == (str(device), dtype_name(dtype))
    assert len(data["turns"]) == 6 and data["scenario"]["replies"] == "reference"
    replies = {(t["conversation"], t["turn"]): t["reply"] for t in data["turns"]}
    assert all(replies[("timestamp-first", n)] == replies[("stable-first", n)] for n in (1, 2, 3))
    assert all(len(t["ttft_passes_s"]) == 2 and t["passes"] == 2 for t in data["turns"])
    assert "stable-first" in proc.stdout and "ttft_ratio [min–max]" in proc.stdout
    report = (out / "report.md").read_text()
    assert "arrival to the first sampled token" in report and "sign test" in report
    assert "too few passes" in report  # 2 passes: no verdict is possible
    assert [t["cold_first_passes"] for t in data["turns"][:3]] == [
        [False, True],
        [True, False],
        [False, True],
    ]
    assert len(data["passes"]) == 2 and "Contention:" in report
    # Before the run: what it will do; after pass 1: that pass's table, and what the rest will take.
    plan = proc.stderr.index("layout: 2 layouts x 3 turns x 2 passes")
    first = proc.stderr.index("Pass 1 of 2 took")
    assert plan < first and "the other 1 pass take about" in proc.stderr and "Pass 2 of" not in proc.stderr
    first_table = proc.stderr[first:].split("\n\n")[0]
    assert "stable-first" in first_table and "timestamp-first" in first_table
    assert "too few passes" in first_table and "ttft_ratio [min–max]" in first_table


def test_own_replies_are_named_confounded() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "engine.bench", "layout", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "own-confounded" in proc.stdout and "CONFOUNDED" in proc.stdout


def test_bad_layout_name_is_a_usage_error(tiny_dir) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "engine.bench", "layout", "--layouts", "upside-down"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "invalid choice" in proc.stderr
