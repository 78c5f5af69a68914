"""The `python -m engine.serve` command line: what it refuses before it loads a model, each with one line."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from engine.errors import InvalidArgumentError
from engine.serve.__main__ import KEY_VARIABLE, api_key_given, parser, served_hosts
from tests.serve.conftest import ROOT


def serve(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k != KEY_VARIABLE} | {"HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "engine.serve", "--model", "smollm2-135m", "--port", "1", *args]
    return subprocess.run(cmd, cwd=ROOT, env=base | env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    ("args", "env", "named"),
    [(["--api-key", ""], {}, "--api-key"), ([], {KEY_VARIABLE: ""}, f"${KEY_VARIABLE}")],
)
def test_an_empty_api_key_is_refused_with_one_line(args: list[str], env: dict[str, str], named: str) -> None:
    """Before the port is checked (port 1 would be refused too) and before any model loads."""
    done = serve(args, env)
    assert done.returncode == 2 and not done.stdout
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(f"error: {named} is empty")
    assert "Traceback" not in done.stderr


def test_the_key_comes_from_the_flag_then_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_VARIABLE, raising=False)
    assert api_key_given(None) is None
    monkeypatch.setenv(KEY_VARIABLE, "from-env")
    assert api_key_given(None) == "from-env" and api_key_given("from-flag") == "from-flag"
    for blank in ("", " ", "\t\n"):
        with pytest.raises(InvalidArgumentError, match="--api-key is empty"):
            api_key_given(blank)
        monkeypatch.setenv(KEY_VARIABLE, blank)
        with pytest.raises(InvalidArgumentError, match=r"\$KVTESTBED_API_KEY is empty"):
            api_key_given(None)
        assert api_key_given("a-key") == "a-key"  # the flag wins over a blank variable


def test_the_app_refuses_an_empty_key_too() -> None:
    from engine.serve.app import build_state

    with pytest.raises(InvalidArgumentError, match="API key is empty"):
        build_state(None, ["m"], api_key="")  # type: ignore[arg-type]  # refused before the engine is read


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--port", "99999"], "--port: value must be at most 65535"),  # was an OverflowError traceback
        (["--port", "65536"], "--port: value must be at most 65535"),
        (["--port", "0"], "--port: value must be at least 1"),
        (["--host", ""], "--host: must not be empty"),  # bound every interface
        (["--host", " "], "--host: must not be empty"),
        (["--served-model-name", ""], "--served-model-name: must not be empty"),
    ],
)
def test_a_bad_flag_is_one_argparse_line(
    args: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as e:
        parser().parse_args(["--model", "m", *args])
    assert e.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith(f"python -m engine.serve: error: argument {named}")


def test_browser_flags_are_checked_by_argparse(capsys: pytest.CaptureFixture[str]) -> None:
    for flag, value, words in (
        ("--allowed-host", "box.lan:8000", "without a port"),
        ("--cors-origin", "app", "origin"),
    ):
        with pytest.raises(SystemExit) as exited:
            parser().parse_args(["--model", "m", flag, value])
        assert exited.value.code == 2
        error = capsys.readouterr().err.splitlines()[-1]
        assert error.startswith(f"python -m engine.serve: error: argument {flag}: ") and words in error
    args = parser().parse_args(
        [
            "--model",
            "m",
            "--allowed-host",
            "Box.lan",
            "--allowed-host",
            "*.corp",
            "--cors-origin",
            "http://a:1",
        ]
    )
    assert args.allowed_host == ["box.lan", "*.corp"] and args.cors_origin == ["http://a:1"]


def test_the_names_answered_are_loopback_the_bound_address_and_the_added_ones() -> None:
    assert served_hosts("127.0.0.1", []) == ["localhost", "127.0.0.1", "[::1]"]
    assert served_hosts("0.0.0.0", ["box.lan"]) == ["localhost", "127.0.0.1", "[::1]", "box.lan"]
    assert served_hosts("192.168.1.5", []) == ["localhost", "127.0.0.1", "[::1]", "192.168.1.5"]
    assert served_hosts("fe80::1", ["*"])[-2:] == ["*", "[fe80::1]"] and served_hosts("::", []) == [
        "localhost",
        "127.0.0.1",
        "[::1]",
    ]
