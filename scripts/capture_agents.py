"""Capture what real agents send: run each client against scripts/capture_server.py on a loopback port and
write every request it made (headers with secrets redacted, body) as test fixtures.

    python scripts/capture_agents.py [--clients claude-code codex agents-responses ...] [--out tests/fixtures/agents]
                                     [--tools-dir /work/agents-tools] [--base /tmp/kvtestbed-capture] [--timeout 180]

Each client is configured only by its documented settings (base URL, key, model) and runs one small task in a
fresh git repository (`<base>/work`, one README.md, a fixed commit) with a fresh home (`<base>/home`), so two
captures differ only where the client itself differs. Claude Code and Codex come from `--tools-dir`
(`npm install --prefix DIR @anthropic-ai/claude-code @openai/codex`) or PATH; the Python clients are
scripts/agent_clients.py. A client that is not installed is skipped with the reason.

As root (or where user namespaces are allowed) the whole capture re-runs itself in a network namespace of its
own with only the loopback interface up (`unshare -n`), so no client can reach any other address (telemetry
included); `--no-netns` skips that, and the clients' documented telemetry switches are set either way.

The fixtures: `<out>/<client>-<label>.json` per request ({client, version, method, path, query, headers,
body}), labels `head`, `no-tools`, `request` (tools offered, no tool result yet), `tool-result`, `-2`, `-3`
on repeats; ids, device ids, commit hashes and the capture's folder replaced by stable placeholders of the
same length; and `<out>/manifest.json` (versions, commands, exit status, last line, each request in order).
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import uvicorn
from capture_server import make_app

ROOT = Path(__file__).resolve().parent.parent
CODING_AGENTS = ["claude-code", "codex"]
PYTHON_AGENTS = ["agents-responses", "agents-chat", "langchain-openai", "langchain-anthropic"]
PROMPT = "List the markdown files in this directory."
KEY = "sk-kvtestbed-capture"
CODEX_PROVIDER = """model = "{model}"
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
PYTHON_PACKAGES = [
    "openai-agents",
    "openai",
    "langchain-openai",
    "langchain-anthropic",
    "langchain-core",
    "anthropic",
]


# Scrubbing: same-length stable placeholders, numbered by first appearance


PATTERNS = [
    ("uuid", re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")),
    ("hex64", re.compile(r"\b[0-9a-f]{64}\b")),
    ("hex40", re.compile(r"\b[0-9a-f]{40}\b")),
]


class Scrubber:
    """Replaces machine-specific values with placeholders of the same length, the same value always by the same
    placeholder (so a session id shared by a header and a body stays shared)."""

    def __init__(self, paths: dict[str, str]) -> None:
        self.seen: dict[str, str] = {}
        self.paths = paths  # literal text -> its replacement (the capture folder)

    def _placeholder(self, kind: str, value: str) -> str:
        if value not in self.seen:
            n = len(self.seen) + 1
            if kind == "uuid":
                self.seen[value] = f"00000000-0000-4000-8000-{n:012d}"
            else:
                self.seen[value] = f"{n:0{len(value)}d}"
        return self.seen[value]

    def text(self, s: str) -> str:
        for literal, replacement in self.paths.items():
            s = s.replace(literal, replacement)
        for kind, pattern in PATTERNS:
            s = pattern.sub(lambda m, k=kind: self._placeholder(k, m.group(0)), s)
        return s

    def value(self, v: Any) -> Any:
        if isinstance(v, str):
            return self.text(v)
        if isinstance(v, list):
            return [self.value(x) for x in v]
        if isinstance(v, dict):
            return {self.text(k): self.value(x) for k, x in v.items()}
        return v


MACHINE_HEADERS = {"host", "content-length"}  # the port, and a length that scrubbing may not keep


def label(record: dict[str, Any]) -> str:
    body = record["body"] if isinstance(record["body"], dict) else {}
    if record["method"] != "POST" or not body:
        return "-".join([record["method"].lower(), *filter(None, record["path"].split("/"))])
    if not body.get("tools"):
        return "no-tools"
    items = body.get("messages") or (body.get("input") if isinstance(body.get("input"), list) else [])
    dumped = json.dumps(items)
    results = ('"tool_result"', '"function_call_output"', '"role": "tool"')
    return "tool-result" if any(r in dumped for r in results) else "request"


def fixtures(
    client: str, version: str, records: list[dict[str, Any]], scrub: Scrubber
) -> dict[str, dict[str, Any]]:
    """File name -> fixture, in request order."""
    out: dict[str, dict[str, Any]] = {}
    for record in records:
        name = f"{client}-{label(record)}"
        n = 2
        while f"{name}.json" in out:
            name, n = f"{client}-{label(record)}-{n}", n + 1
        headers = {k: v for k, v in record["headers"].items() if k not in MACHINE_HEADERS}
        out[f"{name}.json"] = {
            "client": client,
            "version": version,
            "method": record["method"],
            "path": record["path"],
            "query": record["query"],
            "headers": scrub.value(headers),
            "body": scrub.value(record["body"]),
        }
    return out


# Running the clients


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_tool(name: str, tools_dir: Path | None) -> str | None:
    if tools_dir and (tools_dir / "node_modules" / ".bin" / name).exists():
        return str(tools_dir / "node_modules" / ".bin" / name)
    return shutil.which(name)


def tool_version(path: str) -> str:
    out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60).stdout.strip()
    return out.split()[-1] if out.startswith("codex") else out.split()[0]


def python_version(client: str) -> str | None:
    package = "openai-agents" if client.startswith("agents-") else client
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def prepare(base: Path) -> None:
    """A fresh home and a one-commit git repository with fixed dates, so the commit hash is the same every time."""
    shutil.rmtree(base, ignore_errors=True)
    (base / "home").mkdir(parents=True)
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


def command(
    client: str, url: str, base: Path, tools_dir: Path | None
) -> tuple[list[str], dict[str, str]] | str:
    """The command line and environment of one client, or the reason it is skipped."""
    env = {"HOME": str(base / "home"), "PATH": os.environ.get("PATH", ""), "LANG": "C.UTF-8"}
    if client == "claude-code":
        claude = find_tool("claude", tools_dir)
        if not claude:
            return "claude not found (npm install --prefix DIR @anthropic-ai/claude-code)"
        return [claude, "-p", PROMPT], env | QUIET_CLAUDE | {
            "ANTHROPIC_BASE_URL": url,
            "ANTHROPIC_API_KEY": KEY,
        }
    if client == "codex":
        codex = find_tool("codex", tools_dir)
        if not codex:
            return "codex not found (npm install --prefix DIR @openai/codex)"
        home = base / "codex-home"
        home.mkdir(exist_ok=True)
        (home / "config.toml").write_text(CODEX_PROVIDER.format(model="gpt-5.4", url=url))
        return [codex, "exec", PROMPT], env | {"CODEX_HOME": str(home), "KVTESTBED_API_KEY": KEY}
    if python_version(client) is None:
        return f"the Python package for {client} is not installed"
    env |= {"PYTHONPATH": os.environ.get("PYTHONPATH", ""), "OPENAI_AGENTS_DISABLE_TRACING": "1"}
    env |= {
        "OPENAI_BASE_URL": f"{url}/v1",
        "OPENAI_API_KEY": KEY,
        "ANTHROPIC_BASE_URL": url,
        "ANTHROPIC_API_KEY": KEY,
    }
    return [sys.executable, str(ROOT / "scripts" / "agent_clients.py"), client], env


def run_client(client: str, base: Path, tools_dir: Path | None, timeout: float) -> dict[str, Any]:
    log = base / f"{client}.jsonl"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    planned = command(client, url, base, tools_dir)
    if isinstance(planned, str):
        return {"client": client, "skipped": planned}
    argv, env = planned
    version = tool_version(argv[0]) if client in CODING_AGENTS else python_version(client)
    server = uvicorn.Server(uvicorn.Config(make_app(log), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        done = subprocess.run(
            argv,
            cwd=base / "work",
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        rc, output = (
            done.returncode,
            (done.stdout.strip() or done.stderr.strip()),
        )  # the answer, else the error
    except subprocess.TimeoutExpired:
        rc, output = "timeout", f"timed out after {timeout:.0f} s"
    finally:
        server.should_exit = True
        thread.join()
    records = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    shown = shlex.join(
        [
            Path(argv[0]).name,
            *(str(Path(a).relative_to(ROOT)) if a.startswith(f"{ROOT}/") else a for a in argv[1:]),
        ]
    )
    last = output.splitlines()[-1] if output else ""
    return {
        "client": client,
        "version": version,
        "command": shown,
        "exit": rc,
        "last_line": last,
        "records": records,
    }


def in_netns() -> int | None:
    """Re-run this command in a network namespace with only loopback (None: not possible, go on here)."""
    if os.environ.get("KVTESTBED_CAPTURE_NETNS") or not shutil.which("unshare") or not shutil.which("ip"):
        return None
    inner = "ip link set lo up && exec " + shlex.join([sys.executable, *sys.argv])
    flags = ["-n"] if os.geteuid() == 0 else ["-rn"]
    env = os.environ | {"KVTESTBED_CAPTURE_NETNS": "1"}
    return subprocess.run(["unshare", *flags, "sh", "-c", inner], env=env).returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", nargs="+", default=CODING_AGENTS + PYTHON_AGENTS)
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "fixtures" / "agents")
    parser.add_argument(
        "--tools-dir", type=Path, help="an `npm install --prefix` folder with claude and codex"
    )
    parser.add_argument("--base", type=Path, default=Path("/tmp/kvtestbed-capture"))
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds per client")
    parser.add_argument("--no-netns", action="store_true", help="do not isolate the clients' network")
    args = parser.parse_args(argv)
    if not args.no_netns and (rc := in_netns()) is not None:
        return rc
    prepare(args.base)
    scrub = Scrubber({str(args.base): "/tmp/kvtestbed-capture"})
    args.out.mkdir(parents=True, exist_ok=True)
    manifest_path = args.out / "manifest.json"
    earlier = json.loads(manifest_path.read_text())["clients"] if manifest_path.exists() else []
    manifest: dict[str, Any] = {"date": dt.date.today().isoformat(), "prompt": PROMPT}
    manifest["python_packages"] = {p: python_version(p) for p in PYTHON_PACKAGES}
    manifest["clients"] = [c for c in earlier if c["client"] not in args.clients]  # the ones not rerun stay
    for client in args.clients:
        result = run_client(client, args.base, args.tools_dir, args.timeout)
        entry = {k: v for k, v in result.items() if k != "records"}
        if "records" in result:
            files = fixtures(client, str(result["version"]), result["records"], scrub)
            for stale in args.out.glob(f"{client}-*.json"):
                stale.unlink()
            for name, fixture in files.items():
                (args.out / name).write_text(json.dumps(fixture, indent=1, ensure_ascii=False) + "\n")
            entry["last_line"] = scrub.text(entry["last_line"])
            entry["requests"] = [
                {"file": name, "answered": r["answered"]["kind"], "body_bytes": r["body_bytes"]}
                for name, r in zip(files, result["records"], strict=True)
            ]
        manifest["clients"].append(entry)
        said = (
            entry.get("skipped")
            or f"exit {entry['exit']}, {len(entry['requests'])} requests: {entry['last_line']}"
        )
        print(f"{client}: {said}")
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
