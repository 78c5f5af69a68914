"""What every bench command does with its results: --out refused before the model loads, a default run in a
new folder under ./results (a committed reference folder untouched), --overwrite, and Ctrl-C keeping the
finished turns, marked partial."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from engine.bench.__main__ import main
from engine.errors import OutputError
from engine.runtime.engine import Engine
from tests.traces.billing_trace import trace_turns

COMMANDS = ["layout", "replay", "statusbar", "compaction", "sink", "status-attention", "needle"]


@pytest.mark.parametrize("command", COMMANDS)
def test_a_bad_out_is_refused_before_the_model_loads(command, tmp_path) -> None:
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps(trace_turns()))
    first = [command, str(trace)] if command == "replay" else [command]
    full = tmp_path / "full"
    full.mkdir()
    (full / "report.md").write_text("earlier run")
    # a model that does not exist: had it been loaded first, the error would be about the model
    for out, message in ((trace, "is a file; give a folder"), (full, "is not empty: pass --overwrite")):
        with pytest.raises(OutputError, match=message):
            main([*first, "--model", str(tmp_path / "no-model"), "--out", str(out)])
    assert (full / "report.md").read_text() == "earlier run"


def test_the_cli_says_it_in_one_line_with_exit_2(tmp_path) -> None:
    out = tmp_path / "results.json"
    out.write_text("{}")
    proc = subprocess.run(
        [sys.executable, "-m", "engine.bench", "layout", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stderr == f"error: --out {out} is a file; give a folder\n"


def layout_argv(model: str) -> list[str]:
    layouts = ["--layouts", "stable-first", "timestamp-first"]
    return ["layout", "--model", model, *layouts, "--turns", "2", "--repeats", "1", "--replies", "scripted"]


def test_a_default_run_makes_a_new_folder_here(tiny_dir, tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    committed = tmp_path / "results" / "layout-reference"
    committed.mkdir(parents=True)
    (committed / "turns.json").write_text("committed")
    assert main(layout_argv(str(tiny_dir("qwen2", tokenizer=True)))) == 0
    runs = [p for p in (tmp_path / "results").iterdir() if p != committed]
    assert len(runs) == 1 and runs[0].name.startswith("layout-") and (runs[0] / "turns.json").is_file()
    assert f"results: {runs[0].relative_to(tmp_path)}" in capsys.readouterr().out
    assert (committed / "turns.json").read_text() == "committed"


def test_ctrl_c_keeps_the_finished_turns_marked_partial(tiny_dir, tmp_path, monkeypatch, capsys) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    real, calls = Engine.generate, []

    def generate(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 9:  # two warm-ups (the engine, its cold pool), 3 calls a turn: the 3rd turn is cut
            raise KeyboardInterrupt
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Engine, "generate", generate)
    model = str(tiny_dir("qwen2", tokenizer=True))
    assert main([*layout_argv(model), "--out", str(out), "--overwrite"]) == 130
    last_line = capsys.readouterr().err.splitlines()[-1]
    assert last_line == f"interrupted: kept 2 finished turns in {out} (partial)"
    data = json.loads((out / "turns.json").read_text())
    kept = [(t["conversation"], t["turn"]) for t in data["turns"]]
    assert data["environment"]["partial"] is True and kept == [("stable-first", 1), ("timestamp-first", 1)]
    assert "**Partial run**" in (out / "report.md").read_text()
    assert (out / "notes.txt").read_text() == "mine"  # --overwrite replaces our files only


def test_statusbar_without_the_sweep(tiny_dir, tmp_path) -> None:
    """A sweep flag given no values skips the sweep: the main run's files, no sweep.png, and the report says so."""
    model = str(tiny_dir("qwen2", tokenizer=True))
    out = tmp_path / "run"
    argv = ["statusbar", "--model", model, "--steps", "2", "--repeats", "1", "--sweep-status"]
    assert main([*argv, "--out", str(out)]) == 0
    assert (out / "cumulative.png").exists() and not (out / "sweep.png").exists()
    assert "No sweep: a sweep flag was given no values." in (out / "report.md").read_text()
