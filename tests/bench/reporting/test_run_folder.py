"""Where runs write: a new folder under ./results by default, --out checked before any work, --overwrite,
and the one line a Ctrl-C leaves."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from engine.bench.reporting.run_folder import check_out, check_out_file, interrupted, new_run_dir, run_dir
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
