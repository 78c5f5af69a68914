"""Where runs write: a new folder under ./results by default (its name a slug, inside ./results whatever the
session or model is called), --out checked before any work and locked while a run writes it, --overwrite
and what it replaced, and the one line a Ctrl-C leaves."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from engine.bench.reporting.run_folder import (
    check_out,
    check_out_file,
    interrupted,
    named_run_dir,
    new_run_dir,
    run_dir,
    slug,
    written,
)
from engine.errors import OutputError

ENGINE = SimpleNamespace(source=SimpleNamespace(model_id="Org/Model-1B"), device=SimpleNamespace(type="cpu"))


def args(out: Path | None, overwrite: bool = False) -> argparse.Namespace:
    return argparse.Namespace(out=out, overwrite=overwrite)


def test_default_folders_are_new_and_under_the_current_directory(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    committed = tmp_path / "results" / "layout-org_model-1b-cpu"
    committed.mkdir(parents=True)
    (committed / "turns.json").write_text("reference")
    first, second = new_run_dir("layout", ENGINE), run_dir(args(None), "layout", ENGINE)
    assert first != second and first.resolve().parent == second.resolve().parent == tmp_path / "results"
    assert first.name.startswith("layout-org_model-1b-cpu-20") and not any(first.iterdir())
    assert (committed / "turns.json").read_text() == "reference"
    traces = [new_run_dir("replay-trace", ENGINE) for _ in range(2)]  # two trace.json runs: two folders
    assert traces[0] != traces[1] and traces[0].name.startswith("replay-trace-org_model-1b-cpu-")


def _empty(path: Path) -> Path:
    path.mkdir()
    return path


def _full(path: Path) -> Path:
    path.mkdir()
    (path / "keep.txt").write_text("mine")
    return path


def _file(path: Path) -> Path:
    path.write_text("a file")
    return path


# (what --out is, --overwrite, the error it gives or None)
OUT_CASES = [
    ("new", lambda p: p / "new" / "deeper", False, None),
    ("empty folder", lambda p: _empty(p / "empty"), False, None),
    ("non-empty folder", lambda p: _full(p / "full"), False, "is not empty: pass --overwrite"),
    ("non-empty folder, --overwrite", lambda p: _full(p / "full"), True, None),
    ("a file", lambda p: _file(p / "f.json"), False, "is a file; give a folder"),
    ("a file, --overwrite", lambda p: _file(p / "f.json"), True, "is a file; give a folder"),
    ("under a file", lambda p: _file(p / "f.json") / "sub", False, "cannot be made: .*f.json is a file"),
    ("unwritable", lambda p: Path("/sys/kvtestbed-out"), False, "cannot be written"),
]


@pytest.mark.parametrize("name, make, overwrite, error", OUT_CASES, ids=[c[0] for c in OUT_CASES])
def test_out_is_checked_before_any_work(tmp_path, name, make, overwrite, error) -> None:
    if name == "unwritable" and not sys.platform.startswith("linux"):
        pytest.skip("/sys takes no files only on Linux")
    out = make(tmp_path)
    existed = out.exists()
    if error is None:
        check_out(args(out, overwrite))
        assert out.exists() == existed  # checking creates nothing
    else:
        with pytest.raises(OutputError, match=error):
            check_out(args(out, overwrite))
    if name.startswith("non-empty"):
        assert (out / "keep.txt").read_text() == "mine"


def test_default_results_folder_must_be_makeable(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    check_out(args(None))
    assert not (tmp_path / "results").exists()
    (tmp_path / "results").write_text("not a folder")
    with pytest.raises(OutputError, match="results folder results cannot be made: results is a file"):
        check_out(args(None))


def test_picture_out_is_a_png_file_or_a_folder_for_it(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert check_out_file(args(None), "attention.png") is None
    assert check_out_file(args(tmp_path), "attention.png") == tmp_path / "attention.png"
    assert check_out_file(args(tmp_path / "a" / "m.png"), "attention.png") == tmp_path / "a" / "m.png"
    (tmp_path / "attention.png").write_bytes(b"png")
    with pytest.raises(OutputError, match="attention.png exists: pass --overwrite"):
        check_out_file(args(tmp_path), "attention.png")
    assert check_out_file(args(tmp_path, overwrite=True), "attention.png") == tmp_path / "attention.png"
    with pytest.raises(OutputError, match="must be a folder or a .png file name"):
        check_out_file(args(tmp_path / "map.txt"), "attention.png")


def test_interrupted_says_what_was_kept_and_exits_130(tmp_path, capsys) -> None:
    assert interrupted(3, "turns", tmp_path) == 130
    assert capsys.readouterr().err == f"interrupted: kept 3 finished turns in {tmp_path} (partial)\n"
    assert interrupted(0, "turns", None) == 130
    assert capsys.readouterr().err == "interrupted: kept 0 finished turns; nothing written\n"


@pytest.mark.parametrize(
    "session",
    ["../../../../tmp/escaped", "team/alpha", "..", "/etc/passwd", ".hidden", "a\\b:c*d", "", "é" * 300],
)
def test_a_session_id_never_makes_a_path_of_its_own(tmp_path, monkeypatch, session: str) -> None:
    monkeypatch.chdir(tmp_path)
    out = named_run_dir(args(None), f"replay-analyze-{session}-smollm2-135m")
    assert out.resolve().parent == tmp_path / "results"  # one new folder, right under ./results
    assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", out.name) and ".." not in out.name
    assert [p.name for p in tmp_path.iterdir()] == ["results"]
    assert slug(session) == slug(slug(session))  # a slug is its own slug


def test_a_new_out_taken_by_another_run_meanwhile_is_not_shared(tmp_path, capsys) -> None:
    """Two runs with the same new --out both pass the check; the one that finishes second finds the folder
    filled and writes next to it, saying so: the first run's files stay whole."""
    out = tmp_path / "run"
    check_out(args(out))
    out.mkdir()  # the other run, finished
    (out / "report.md").write_text("the other run")
    second = named_run_dir(args(out), "layout")
    assert second == tmp_path / "run-2" and (out / "report.md").read_text() == "the other run"
    assert f"--out {out} was taken by another run after this one started; writing to {second}" in (
        capsys.readouterr().err
    )


def test_an_out_locked_by_a_running_process_is_not_shared(tmp_path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    holder = subprocess.Popen(  # another run, still writing: it holds the folder's lock
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); fcntl.flock(fd, fcntl.LOCK_EX); "
            "print('locked', flush=True); sys.stdin.read()",
            str(out),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        assert named_run_dir(args(out, overwrite=True), "layout") == tmp_path / "run-2"
    finally:
        holder.communicate("", timeout=30)
    assert named_run_dir(args(out, overwrite=True), "layout") == out  # released when its process ended


def test_overwrite_lists_what_it_replaced(tmp_path, capsys) -> None:
    out = _full(tmp_path / "run")  # keep.txt
    (out / "report.md").write_text("earlier run")
    check_out(args(out, overwrite=True))
    folder = named_run_dir(args(out, overwrite=True), "layout")
    (folder / "report.md").write_text("this run")
    (folder / "turns.csv").write_text("new")
    assert written(folder) == 0
    captured = capsys.readouterr()
    assert captured.out == f"results: {out}\n"
    assert captured.err == (
        f"[--overwrite: replaced 1 of the 2 files that were in {out}: report.md; kept keep.txt]\n"
    )
    assert (out / "keep.txt").read_text() == "mine"


def test_run_folders_are_ignored_by_git_and_committed_ones_are_not(tmp_path, monkeypatch) -> None:
    repo = Path(__file__).resolve().parents[3]
    monkeypatch.chdir(tmp_path)
    run = new_run_dir("layout", ENGINE)  # results/layout-org_model-1b-cpu-<UTC time>
    again = new_run_dir("layout", ENGINE)  # the same second: ...-2
    paths = [
        f"results/{run.name}/report.md",
        f"results/{again.name}/turns.csv",
        "results/layout-x-cpu/report.md",
    ]
    proc = subprocess.run(["git", "check-ignore", *paths], cwd=repo, capture_output=True, text=True)
    assert proc.stdout.split() == paths[:2]
    tracked_but_ignored = subprocess.run(
        ["git", "ls-files", "-ci", "--exclude-standard"], cwd=repo, capture_output=True, text=True, check=True
    )
    assert tracked_but_ignored.stdout == ""
