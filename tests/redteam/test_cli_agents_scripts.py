"""scripts/agents_check.py and scripts/agents_cache.py (scripts/agents_check.sh runs the first): waits that
are no number of seconds (`--python-timeout nan`, `-5`), folders that cannot be written (`--out /proc/x`,
`--work /proc/x`: a traceback after the installs), clients that are not there under `--no-install`
(`--tools-dir /nonexistent`: an AssertionError), and a server that never started (`--server-flag=--bogus`, a
`--coding-model` that does not exist: exit 0, every client 'skipped')."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import agents_cache  # noqa: E402
import agents_check  # noqa: E402


def refused(capsys: pytest.CaptureFixture[str], main, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert exited.value.code == 2 and len(errors) == 1 and "Traceback" not in err, err
    return errors[0]


@pytest.mark.parametrize("flag", ["--timeout", "--python-timeout"])
@pytest.mark.parametrize("value", ["nan", "-5", "0", "inf", "ten"])
def test_a_wait_that_is_no_number_of_seconds_is_one_line(tmp_path, capsys, flag, value) -> None:
    line = refused(capsys, agents_check.main, [flag, value, "--out", str(tmp_path), "--no-install"])
    assert f"argument {flag}:" in line and value in line


@pytest.mark.parametrize("value", ["nan", "-5"])
def test_agents_cache_timeout_is_checked_too(tmp_path, capsys, value) -> None:
    argv = ["--timeout", value, "--out", str(tmp_path / "o"), "--work", str(tmp_path / "w"), "--no-install"]
    assert "argument --timeout:" in refused(capsys, agents_cache.main, argv)


@pytest.mark.parametrize("folder", ["/proc/x", "/proc/self/status/x", "/dev/null/x"])
def test_a_folder_that_cannot_be_written_is_one_line(tmp_path, capsys, folder) -> None:
    line = refused(capsys, agents_check.main, ["--out", folder, "--no-install", "--no-netns"])
    assert f"--out {folder}: cannot write there" in line
    argv = ["--work", folder, "--out", str(tmp_path / "o"), "--no-install", "--no-netns"]
    assert f"--work {folder}: cannot write there" in refused(capsys, agents_cache.main, argv)
    argv = ["--out", folder, "--work", str(tmp_path / "w"), "--no-install", "--no-netns"]
    assert f"--out {folder}: cannot write there" in refused(capsys, agents_cache.main, argv)


def test_clients_not_found_under_no_install_are_skipped_with_the_reason(
    tmp_path, capsys, monkeypatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # neither claude nor codex on PATH
    argv = ["--tools-dir", "/nonexistent", "--no-install", "--no-netns"]
    argv += ["--out", str(tmp_path / "o"), "--work", str(tmp_path / "w")]
    assert agents_cache.main(argv) == 1
    err = capsys.readouterr().err
    assert "error: no client to run: claude-code: skipped: not found in /nonexistent nor on PATH" in err
    assert not (tmp_path / "o" / "report.md").exists()


@pytest.mark.parametrize(
    ("argv", "model"),
    [
        (["--clients", "agents-chat", "--server-flag=--bogus"], "smollm2-135m"),
        (["--clients", "claude-code", "--coding-model", "/nonexistent/model"], "/nonexistent/model"),
    ],
    ids=["--server-flag=--bogus", "a missing --coding-model"],
)
def test_a_server_that_never_started_fails_the_check(tmp_path, capsys, monkeypatch, argv, model) -> None:
    monkeypatch.setattr(agents_check, "prepare_clients", lambda args: {})  # as if installed
    monkeypatch.setattr(agents_check, "check_client", lambda *a: pytest.fail("a client ran without a server"))
    assert agents_check.main([*argv, "--out", str(tmp_path), "--no-netns"]) == 1
    captured = capsys.readouterr()
    assert "error: the server exited with" in captured.err
    assert f"on {model}: FAILED: the server exited with" in captured.out and "skipped" not in captured.out


def test_the_shell_entry_passes_the_refusal_through(tmp_path) -> None:
    done = subprocess.run(
        ["bash", "scripts/agents_check.sh", "--python-timeout", "nan", "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable},
    )
    assert done.returncode == 2 and "argument --python-timeout: must be a finite number" in done.stderr
