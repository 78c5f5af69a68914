"""The commit a result records: kvtestbed's own checkout's, `+dirty` with uncommitted changes, and
"unknown" for a package that does not sit in its own checkout (never another repository's commit)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from engine.bench.reporting.results import git_commit


def git(repo: Path, *args: str) -> str:
    run = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True)
    return run.stdout.strip()


def commit_all(repo: Path) -> str:
    git(repo, "add", ".")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
    return git(repo, "rev-parse", "--short", "HEAD")


def test_the_checkout_of_this_package_gives_its_commit(tmp_path) -> None:
    (tmp_path / "engine").mkdir()
    (tmp_path / "engine" / "__init__.py").write_text("")
    git(tmp_path, "init", "-q")
    sha = commit_all(tmp_path)
    assert git_commit(tmp_path) == sha
    (tmp_path / "engine" / "__init__.py").write_text("# changed\n")
    assert git_commit(tmp_path) == f"{sha}+dirty"


def test_an_install_inside_another_repository_records_no_commit(tmp_path) -> None:
    """A virtual environment inside someone's project: git finds their repository, which does not track
    this package, so its commit is not recorded as ours."""
    project = tmp_path / "their-project"
    site = project / ".venv" / "lib" / "site-packages"
    (site / "engine").mkdir(parents=True)
    (site / "engine" / "__init__.py").write_text("")
    (project / "app.py").write_text("print('theirs')\n")
    (project / ".gitignore").write_text(".venv/\n")
    git(project, "init", "-q")
    commit_all(project)
    assert git_commit(site) == "unknown"
    assert git_commit(tmp_path) == "unknown"  # no repository at all


def test_every_result_records_the_load_and_its_report_says_whether_it_was_quiet() -> None:
    """A timing is a reference only from a quiet machine: the environment keeps the load averages when the
    command started and when it wrote, and the report's opening lines judge the start's 1-minute load."""
    import argparse

    from engine.bench.reporting.results import provenance, run_environment
    from engine.machine_load import QUIET as QUIET_LOAD

    env = run_environment({}, "test", argparse.Namespace(x=1))
    for key in ("load_average_at_start", "load_average_at_end"):
        assert len(env[key]) == 3 and all(x >= 0 for x in env[key])
    quiet = provenance(env | {"load_average_at_start": [QUIET_LOAD / 2, 0.1, 0.1]})
    busy = provenance(env | {"load_average_at_start": [QUIET_LOAD * 4, 1.0, 1.0]})
    assert any("quiet" in line and "busy" not in line for line in quiet)
    assert any("busy: its timings are not a reference" in line for line in busy)
