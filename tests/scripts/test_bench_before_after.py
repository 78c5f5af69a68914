"""scripts/bench_before_after.sh in a small git repository, against a stand-in interpreter that records where
and how it was called: the cases run in a worktree of the earlier commit holding this tree's benchmarks/, then
here, then the comparison after-against-before; the temporary worktree is removed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FAKE = """#!/usr/bin/env bash
echo "engine=$(cat engine/version 2>/dev/null) benchmarks=$(cat benchmarks/version 2>/dev/null) $*" \\
  >> "$CALLS"
case "$*" in
  "-m pytest"*) echo "${OMP_WAIT_POLICY:-unset}" >> "$CALLS.omp" ;;
esac
case "$(cat engine/version 2>/dev/null) $*" in
  "old -m pytest"*) exit "${BEFORE_PYTEST_STATUS:-0}" ;;
esac
"""


def git(repo: Path, *args: str) -> str:
    env = {"PATH": "/usr/bin:/bin", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "HOME": str(repo)}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env
    ).stdout


def repository(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "engine").mkdir(parents=True)
    (repo / "benchmarks").mkdir()
    (repo / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "bench_before_after.sh", repo / "scripts")
    git(repo, "init", "-q", "-b", "main")
    for version in ("old", "new"):
        (repo / "engine" / "version").write_text(version)
        (repo / "benchmarks" / "version").write_text(version)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", version)
    return repo


def run(
    repo: Path, tmp_path: Path, *args: str, before_status: int = 0, **env: str
) -> subprocess.CompletedProcess[str]:
    fake = tmp_path / "fake-python"
    fake.write_text(FAKE)
    fake.chmod(0o755)
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHON": str(fake),
        "CALLS": str(tmp_path / "calls.log"),
        "HOME": str(repo),
        "BEFORE_PYTEST_STATUS": str(before_status),
    } | env
    return subprocess.run(
        ["bash", "scripts/bench_before_after.sh", *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_earlier_engine_runs_this_trees_benchmarks_then_this_one_then_the_comparison(tmp_path) -> None:
    repo = repository(tmp_path)
    done = run(repo, tmp_path, "--before", "HEAD~1", "--quick", "--out", "out")  # the options in any order
    assert done.returncode == 0, done.stderr
    calls = (tmp_path / "calls.log").read_text().splitlines()
    suites = [c for c in calls if " -m pytest " in c]
    cases = "benchmarks/test_prefix.py::test_warm_against_contiguous benchmarks/test_decode.py"
    assert len(suites) == 2 and all(
        cases in s and "--devices cpu" in s and s.endswith("--quick") for s in suites
    )
    assert suites[0].startswith("engine=old benchmarks=new ") and f"{repo}/out/before.json" in suites[0]
    assert suites[1].startswith("engine=new benchmarks=new ") and f"{repo}/out/after.json" in suites[1]
    assert calls[2:] == [
        f"engine=new benchmarks=new scripts/bench_report.py {repo}/out/before.json",
        f"engine=new benchmarks=new scripts/bench_report.py {repo}/out/after.json",
        f"engine=new benchmarks=new scripts/bench_compare.py {repo}/out/after.json {repo}/out/before.json",
    ]
    assert len(git(repo, "worktree", "list").splitlines()) == 1  # the temporary one is gone


def test_an_unknown_commit_is_one_line(tmp_path) -> None:
    repo = repository(tmp_path)
    done = run(repo, tmp_path, "--before", "nosuchrev")
    assert done.returncode == 2 and done.stderr.strip() == "error: --before nosuchrev is no commit"


def test_a_case_failing_its_own_target_keeps_the_run_going(tmp_path) -> None:
    """The earlier engine missing a benchmark's target (pytest exit 1, its timings written) is said, not fatal:
    the later engine runs and the comparison is made; any other stop (2: interrupted, usage) ends the run."""
    repo = repository(tmp_path)
    done = run(repo, tmp_path, "--before", "HEAD~1", "--out", "out", before_status=1)
    assert done.returncode == 0, done.stderr
    calls = (tmp_path / "calls.log").read_text().splitlines()
    assert sum(" -m pytest " in c for c in calls) == 2 and "bench_compare.py" in calls[-1]
    assert (
        (repo / "out" / "comparison.txt")
        .read_text()
        .splitlines()[-1]
        .startswith("cases failed in the before run")
    )
    (tmp_path / "calls.log").unlink()
    stopped = run(repo, tmp_path, "--before", "HEAD~1", "--out", "out", before_status=2)
    assert (
        stopped.returncode == 2 and "error: the before run stopped (pytest exit status 2)" in stopped.stderr
    )
    assert sum(" -m pytest " in c for c in (tmp_path / "calls.log").read_text().splitlines()) == 1
    assert len(git(repo, "worktree", "list").splitlines()) == 1


def test_both_engines_threads_wait_alike(tmp_path) -> None:
    """The earlier engine predates engine/openmp.py: both sides run with OpenMP's threads waiting passively,
    as today's engine sets them, or both as the user chose."""
    repo = repository(tmp_path)
    assert run(repo, tmp_path, "--before", "HEAD~1", "--out", "out").returncode == 0
    assert (tmp_path / "calls.log.omp").read_text().split() == ["PASSIVE", "PASSIVE"]
    (tmp_path / "calls.log.omp").unlink()
    assert run(repo, tmp_path, "--before", "HEAD~1", "--out", "out", OMP_WAIT_POLICY="ACTIVE").returncode == 0
    assert (tmp_path / "calls.log.omp").read_text().split() == ["ACTIVE", "ACTIVE"]
