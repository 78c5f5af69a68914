"""Where each real client is found, and how it is installed where missing: Claude Code and Codex from the npm
registry (`npm install --prefix TOOLS_DIR`), the Python clients from PyPI into a virtual environment of their
own under TOOLS_DIR (`venvs/<package>`), never into the interpreter that runs the check (their dependencies
would change what the user has installed). A Python client already importable here is used as it is.
"""

from __future__ import annotations

import importlib.metadata
import shutil
import subprocess
import sys
from pathlib import Path

CODING_AGENTS = ["claude-code", "codex"]
PYTHON_AGENTS = ["agents-responses", "agents-chat", "langchain-openai", "langchain-anthropic", "aider"]
NPM_PACKAGES = {"claude-code": "@anthropic-ai/claude-code", "codex": "@openai/codex"}
BINARIES = {"claude-code": "claude", "codex": "codex", "aider": "aider"}
PIP_PACKAGES = {
    "agents-responses": "openai-agents",
    "agents-chat": "openai-agents",
    "langchain-openai": "langchain-openai",
    "langchain-anthropic": "langchain-anthropic",
    "aider": "aider-chat",
}
INSTALL_S = 900.0


def find_tool(client: str, tools_dir: Path | None) -> str | None:
    """Claude Code's or Codex's binary in `tools_dir` (an `npm install --prefix` folder), aider's in its
    environment there; else on PATH."""
    name = BINARIES[client]
    if tools_dir and client == "aider" and (venv(tools_dir, client) / "bin" / name).exists():
        return str(venv(tools_dir, client) / "bin" / name)
    if tools_dir and (tools_dir / "node_modules" / ".bin" / name).exists():
        return str(tools_dir / "node_modules" / ".bin" / name)
    return shutil.which(name)


def venv(tools_dir: Path, client: str) -> Path:
    return tools_dir / "venvs" / PIP_PACKAGES[client]


def package_version(package: str) -> str | None:
    """The version of `package` in this interpreter, or None."""
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def installed_version(client: str, tools_dir: Path | None) -> str | None:
    """The version of a Python client's package: here, else in its environment under `tools_dir`."""
    package = PIP_PACKAGES[client]
    if (here := package_version(package)) or tools_dir is None:
        return here
    folder = package.replace("-", "_")
    infos = sorted(venv(tools_dir, client).glob(f"lib/python*/site-packages/{folder}-*.dist-info"))
    return infos[-1].name.removeprefix(f"{folder}-").removesuffix(".dist-info") if infos else None


def python_for(client: str, tools_dir: Path | None) -> str | None:
    """The interpreter that has the client's package: this one, else its environment's under `tools_dir`."""
    if package_version(PIP_PACKAGES[client]):
        return sys.executable
    if tools_dir is None or installed_version(client, tools_dir) is None:
        return None
    return str(venv(tools_dir, client) / "bin" / "python")


def found(client: str, tools_dir: Path | None) -> bool:
    if client in CODING_AGENTS or client == "aider":
        return find_tool(client, tools_dir) is not None
    return python_for(client, tools_dir) is not None


def tool_version(path: str) -> str:
    """`claude --version` says `2.1.197 (Claude Code)`, `codex --version` `codex-cli 0.171.0`, `aider
    --version` `aider 0.86.2`."""
    out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60).stdout.split()
    if not out:
        return "unknown"
    return out[1] if out[0] in ("codex-cli", "aider") and len(out) > 1 else out[0]


def version(client: str, tools_dir: Path | None) -> str | None:
    if client in CODING_AGENTS or client == "aider":
        path = find_tool(client, tools_dir)
        return tool_version(path) if path else None
    return installed_version(client, tools_dir)


def missing(clients: list[str], tools_dir: Path) -> dict[str, str]:
    """Client -> why it cannot run, for those not installed (nothing is installed here: --no-install)."""
    where = {c: f"not found in {tools_dir} nor on PATH" for c in CODING_AGENTS}
    where |= {c: f"{PIP_PACKAGES[c]} is not installed here nor in {tools_dir}" for c in PYTHON_AGENTS}
    return {c: f"{where[c]} (--no-install)" for c in clients if not found(c, tools_dir)}


def install(clients: list[str], tools_dir: Path) -> dict[str, str]:
    """Install what is missing; client -> why it is skipped, for those that stay missing."""
    skipped: dict[str, str] = {}
    npm = [c for c in clients if c in CODING_AGENTS and not found(c, tools_dir)]
    if npm and not shutil.which("npm"):
        skipped |= {c: "npm not found (Node.js and npm install Claude Code and Codex)" for c in npm}
    elif npm:
        packages = [NPM_PACKAGES[c] for c in npm]
        print(f"installing {' '.join(packages)} into {tools_dir} (npm)", flush=True)
        argv = ["npm", "install", "--no-fund", "--no-audit", "--prefix", str(tools_dir), *packages]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=INSTALL_S)
        why = (done.stderr.strip().splitlines() or ["?"])[-1]
        skipped |= {c: f"npm install {NPM_PACKAGES[c]} failed: {why}" for c in npm if not found(c, tools_dir)}
    pip = [c for c in clients if c in PYTHON_AGENTS and not found(c, tools_dir)]
    for package in dict.fromkeys(PIP_PACKAGES[c] for c in pip):
        mine = [c for c in pip if PIP_PACKAGES[c] == package]
        if why := pip_install(package, venv(tools_dir, mine[0])):
            skipped |= {c: why for c in mine}
    return skipped


def pip_install(package: str, folder: Path) -> str | None:
    """`package` into the virtual environment `folder` (made where missing); None, else why it failed."""
    print(f"installing {package} into {folder} (pip, a virtual environment of its own)", flush=True)
    steps = [[sys.executable, "-m", "venv", str(folder)], [str(folder / "bin" / "python"), "-m", "pip"]]
    steps[1] += ["install", "-q", "--disable-pip-version-check", package]
    for argv in steps if not (folder / "bin" / "python").exists() else steps[1:]:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=INSTALL_S)
        if done.returncode != 0:
            tail = " ".join((done.stderr.strip().splitlines() or ["?"])[-1].split())[:200]
            return f"{Path(argv[0]).name} {' '.join(argv[1:])} failed: {tail}"
    return None
