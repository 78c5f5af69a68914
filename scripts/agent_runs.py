"""How each real client is run against a server at a base URL, configured only by its documented settings:
the command line and environment per client, a fresh work tree, the installed versions, one bounded run, and
a network namespace with nothing but loopback. Shared by scripts/capture_agents.py (against the capture
server) and scripts/agents_check.py (against `python -m engine.serve`).

| client | settings |
|---|---|
| claude-code | `ANTHROPIC_BASE_URL`, `ANTHROPIC_API_KEY` (+ its telemetry switches); `claude -p PROMPT` |
| codex | `$CODEX_HOME/config.toml`: a `[model_providers.kvtestbed]` with `base_url`, `env_key`, `wire_api = "responses"`; `codex exec PROMPT` |
| agents-responses, agents-chat, langchain-openai, langchain-anthropic | `OPENAI_BASE_URL` / `OPENAI_API_KEY`, `ANTHROPIC_BASE_URL` / `ANTHROPIC_API_KEY`; scripts/agent_clients.py |
| aider | `--model openai/NAME --openai-api-base URL/v1 --openai-api-key KEY` and AIDER_FLAGS; `--message PROMPT` |
"""

from __future__ import annotations

import argparse
import math
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from agent_installs import (
    BINARIES,
    CODING_AGENTS,
    NPM_PACKAGES,
    PIP_PACKAGES,
    find_tool,
    python_for,
)

ROOT = Path(__file__).resolve().parent.parent
PROMPT = "List the markdown files in this directory."
AIDER_PROMPT = "Add a line to README.md that says it was edited."
CODEX_MODEL = "gpt-5.4"  # the model config.toml names (any name the server serves)
CODEX_CONFIG = """model = "{model}"
model_provider = "kvtestbed"
check_for_update_on_startup = false

[analytics]
enabled = false

[model_providers.kvtestbed]
name = "kvtestbed"
base_url = "{url}/v1"
env_key = "KVTESTBED_API_KEY"
wire_api = "responses"
"""
QUIET_CLAUDE = {"DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1", "DISABLE_AUTOUPDATER": "1"}
NETNS_VARIABLE = "KVTESTBED_LOOPBACK_NETNS"
RUNS = [("A1", "work"), ("A2", "work"), ("B1", "elsewhere")]  # two runs in one directory, one in another
MARK = ".kvtestbed-agent-run"  # in each folder a run made, so a later run may empty it
# aider without a terminal: the counts from `usage` (not streamed), its questions answered yes, no update
# check, no analytics (`--yes-always` would opt in where aider asks), no model warning and no release notes
# (each offers to open a browser); then `--message`: one message, and exit
AIDER_FLAGS = [
    "--no-stream",
    "--yes-always",
    "--no-check-update",
    "--analytics-disable",
    "--no-show-model-warnings",
    "--no-show-release-notes",
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def seconds(value: str) -> float:
    """argparse `type=` for a wait: a finite number of seconds above 0 (nan never ended, -5 never started)."""
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
    if not (math.isfinite(number) and number > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds above 0, got {value}")
    return number


def writable_folder(parser: argparse.ArgumentParser, flag: str, path: Path) -> None:
    """Make the folder `path` (with its parents) and check it can be written, else argparse's one error line
    naming `flag` (exit 2), before anything is installed or started."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        if not os.access(path, os.W_OK | os.X_OK):
            raise PermissionError(13, "not writable")
    except OSError as e:
        parser.error(f"{flag} {path}: cannot write there ({e.strerror or e})")


def not_ours(folder: Path) -> str | None:
    """Why `folder` may not be emptied for a run: it holds files and no mark that a run made it; else None."""
    if folder.is_dir() and any(folder.iterdir()) and not (folder / MARK).exists():
        return (
            f"{folder} holds files that no agents run wrote (no {MARK}); remove them or choose another folder"
        )
    if folder.exists() and not folder.is_dir():
        return f"{folder} is a file"
    return None


def claim(folder: Path) -> None:
    """Empty `folder` (made by an earlier run: only such a folder, see not_ours) and mark it as a run's."""
    if why := not_ours(folder):
        raise FileExistsError(why)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    (folder / MARK).write_text("made by scripts/agent_runs.py: emptied by the next run\n")


def prepare(base: Path) -> None:
    """A fresh home and a one-commit git repository with fixed dates (so the same commit hash every time),
    `work`, and a copy of it, `elsewhere`, in `base` emptied (only a folder an earlier run made: nothing of
    the user's is deleted)."""
    claim(base)
    (base / "home").mkdir()
    work = base / "work"
    work.mkdir()
    (work / "README.md").write_text("# demo\n\nA small project for the capture.\n")
    env = os.environ | {
        "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
        "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    }
    git = ["git", "-C", str(work), "-c", "user.name=kvtestbed", "-c", "user.email=kvtestbed@localhost"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True)
    subprocess.run([*git, "add", "README.md"], check=True, env=env)
    subprocess.run([*git, "commit", "-q", "-m", "init"], check=True, env=env)
    shutil.copytree(work, base / "elsewhere", symlinks=True)


def command(
    client: str, url: str, base: Path, tools_dir: Path | None, key: str, model: str | None = None
) -> tuple[list[str], dict[str, str]] | str:
    """The command line and environment of one client against `url`, or the reason it cannot run. `model`: the
    name Codex's config.toml and the Python clients ask for (Claude Code asks for its own default)."""
    env = {"HOME": str(base / "home"), "PATH": os.environ.get("PATH", ""), "LANG": "C.UTF-8"}
    if client in CODING_AGENTS:
        binary = find_tool(client, tools_dir)
        if not binary:
            return f"{BINARIES[client]} not found (npm install --prefix DIR {NPM_PACKAGES[client]})"
        if client == "claude-code":
            return [binary, "-p", PROMPT], env | QUIET_CLAUDE | {
                "ANTHROPIC_BASE_URL": url,
                "ANTHROPIC_API_KEY": key,
            }
        home = base / "codex-home"
        home.mkdir(exist_ok=True)
        (home / "config.toml").write_text(CODEX_CONFIG.format(model=model or CODEX_MODEL, url=url))
        return [binary, "exec", PROMPT], env | {"CODEX_HOME": str(home), "KVTESTBED_API_KEY": key}
    if client == "aider":
        if not (binary := find_tool(client, tools_dir)):
            return f"aider not found (pip install {PIP_PACKAGES[client]})"
        argv = [binary, "--model", f"openai/{model or 'gpt-4o-mini'}", "--openai-api-base", f"{url}/v1"]
        return argv + ["--openai-api-key", key, *AIDER_FLAGS, "--message", AIDER_PROMPT], env
    if (python := python_for(client, tools_dir)) is None:
        return f"the Python package {PIP_PACKAGES[client]} is not installed"
    env |= {"PYTHONPATH": os.environ.get("PYTHONPATH", ""), "OPENAI_AGENTS_DISABLE_TRACING": "1"}
    env |= {
        "OPENAI_BASE_URL": f"{url}/v1",
        "OPENAI_API_KEY": key,
        "ANTHROPIC_BASE_URL": url,
        "ANTHROPIC_API_KEY": key,
    }
    argv = [python, str(ROOT / "scripts" / "agent_clients.py"), client]
    return argv + (["--model", model] if model else []), env


@dataclass
class Run:
    command: str  # as a person would type it (the binary's name, paths in this repository relative)
    exit: int | str  # the exit status, or "timeout"
    last_line: (
        str  # its standard output's last line (its answer); its standard error's when it failed and wrote one
    )
    seconds: float


def run(argv: list[str], env: dict[str, str], cwd: Path, timeout: float) -> Run:
    shown = shlex.join(
        [
            Path(argv[0]).name,
            *(str(Path(a).relative_to(ROOT)) if a.startswith(f"{ROOT}/") else a for a in argv[1:]),
        ]
    )
    start = time.monotonic()
    process = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )  # its own process group, so a timeout ends what it started too (Codex's sandboxed commands)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        tail = stderr.strip().splitlines()[-1:] or [""]
        return Run(
            shown, "timeout", f"(timed out after {timeout:.0f} s) {tail[0]}".strip(), time.monotonic() - start
        )
    failed = process.returncode != 0 and stderr.strip()  # a failing client says why on its standard error
    output = stderr.strip() if failed else stdout.strip() or stderr.strip()
    return Run(shown, process.returncode, output.splitlines()[-1] if output else "", time.monotonic() - start)


def in_loopback_netns() -> int | None:
    """Re-run this command in a network namespace with only the loopback interface up, so no client reaches
    any other address; its exit status, or None when that is not possible here (go on as is)."""
    if os.environ.get(NETNS_VARIABLE) or not shutil.which("unshare") or not shutil.which("ip"):
        return None
    flags = ["-n"] if os.geteuid() == 0 else ["-rn"]
    if subprocess.run(["unshare", *flags, "true"], capture_output=True).returncode != 0:
        return None
    inner = "ip link set lo up && exec " + shlex.join([sys.executable, *sys.argv])
    return subprocess.run(
        ["unshare", *flags, "sh", "-c", inner], env=os.environ | {NETNS_VARIABLE: "1"}
    ).returncode
