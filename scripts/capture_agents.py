"""Capture what real agents send: run each client against scripts/capture_server.py on a loopback port and
write every request it made (headers with secrets redacted, body) as test fixtures.

    python scripts/capture_agents.py [--clients claude-code codex agents-responses ...] [--out tests/fixtures/agents]
                                     [--tools-dir /work/agents-tools] [--base /tmp/kvtestbed-capture] [--timeout 180]

Each client is configured only by its documented settings (scripts/agent_runs.py: base URL, key, model) and
runs one small task in a fresh one-commit git repository (`<base>/work`) with a fresh home (`<base>/home`), so
two captures differ only where the client itself differs. Claude Code and Codex come from `--tools-dir`
(`npm install --prefix DIR @anthropic-ai/claude-code @openai/codex`) or PATH; the Python clients are
scripts/agent_clients.py. A client that is not installed is skipped with the reason. Where it can (root, or
user namespaces allowed), the capture re-runs itself in a network namespace with only loopback up, so no
client reaches any other address (telemetry included); `--no-netns` skips that. The clients' documented
telemetry switches are set either way.

The fixtures: `<out>/<client>-<label>.json` per request ({client, version, method, path, query, headers,
body}), labels `head`, `no-tools`, `request` (tools offered, no tool result yet), `tool-result`, with `-2`,
`-3` on repeats; ids, device ids, commit hashes and the capture's folder replaced by stable placeholders of
the same length; and `<out>/manifest.json` (versions, commands, exit status, last line, each request in
order). A rerun replaces the files of the clients it runs and keeps the others.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import threading
import time
from pathlib import Path
from typing import Any

import uvicorn
from agent_installs import CODING_AGENTS, PYTHON_AGENTS, package_version, version
from agent_runs import PROMPT, ROOT, command, free_port, in_loopback_netns, prepare, run
from capture_server import make_app

KEY = "sk-kvtestbed-capture"
PYTHON_PACKAGES = [
    "openai-agents",
    "openai",
    "langchain-openai",
    "langchain-anthropic",
    "langchain-core",
    "anthropic",
]


# Scrubbing: same-length stable placeholders, numbered by first appearance


HEX = "0-9a-f"
PATTERNS = [  # bounded by non-hex characters, so `msg_<uuid>` and `"<hex>"` match but longer hex runs do not
    (
        "uuid",
        re.compile(
            rf"(?<![{HEX}])[{HEX}]{{8}}-[{HEX}]{{4}}-[{HEX}]{{4}}-[{HEX}]{{4}}-[{HEX}]{{12}}(?![{HEX}])"
        ),
    ),
    ("hex64", re.compile(rf"(?<![{HEX}])[{HEX}]{{64}}(?![{HEX}])")),
    ("hex40", re.compile(rf"(?<![{HEX}])[{HEX}]{{40}}(?![{HEX}])")),
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


def run_client(client: str, base: Path, tools_dir: Path | None, timeout: float) -> dict[str, Any]:
    """One client against a fresh capture server: its run, and every request the server logged."""
    log = base / f"{client}.jsonl"
    port = free_port()
    planned = command(client, f"http://127.0.0.1:{port}", base, tools_dir, KEY)
    if isinstance(planned, str):
        return {"client": client, "skipped": planned}
    server = uvicorn.Server(uvicorn.Config(make_app(log), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        done = run(*planned, cwd=base / "work", timeout=timeout)
    finally:
        server.should_exit = True
        thread.join()
    records = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    entry = {
        "client": client,
        "version": version(client, tools_dir),
        "command": done.command,
        "exit": done.exit,
    }
    return entry | {"last_line": done.last_line, "records": records}


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
    if not args.no_netns and (rc := in_loopback_netns()) is not None:
        return rc
    prepare(args.base)
    scrub = Scrubber({str(args.base): "/tmp/kvtestbed-capture"})
    args.out.mkdir(parents=True, exist_ok=True)
    manifest_path = args.out / "manifest.json"
    earlier = json.loads(manifest_path.read_text())["clients"] if manifest_path.exists() else []
    manifest: dict[str, Any] = {"date": dt.date.today().isoformat(), "prompt": PROMPT}
    manifest["python_packages"] = {p: package_version(p) for p in PYTHON_PACKAGES}
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
    order = CODING_AGENTS + PYTHON_AGENTS
    manifest["clients"].sort(key=lambda c: order.index(c["client"]) if c["client"] in order else len(order))
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
