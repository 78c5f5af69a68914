"""Real agents against `python -m engine.serve`, each configured only by its documented settings
(scripts/agent_runs.py), each run three times, twice in one directory (A1, A2) and once in a copy of it
elsewhere (B1): per client and run, the exit status and last line, each request's cached and prompt tokens,
miss reason and tool calls; the HTTP statuses the server answered; and the cached tokens of the first request
of A2 (else B1) that repeats one of A1 (same body but for per-session fields).

    scripts/agents_check.sh [--clients claude-code codex agents-responses agents-chat langchain-openai
                             langchain-anthropic aider] [--tools-dir DIR] [--out DIR] [--no-install]
                            [--timeout S] [--python-timeout S] [--server-flag=--FLAG=VALUE ...] [--coding-model M]

Claude Code's (~21k tokens of Qwen's tokenizer) and Codex's (~6k) prompts, with their replies, exceed SmolLM2's
8k context: they go to one server on `synthetic:qwen2.5-0.5b` (or --coding-model) serving the model names they
ask for; the Python clients go to one on `smollm2-135m` and ask for that name, aider to another (its replies,
`--replies script:FILE`, edit README.md in aider's format: it offers no tools). The others serve scripted
replies (`--replies agent`: a tool call each client knows, then a short answer, forced through the engine), so
every run is a whole session with a tool call (a server without that flag: replies capped at 32 and 256
tokens). Claude Code and Codex are found in --tools-dir or on PATH, else installed there from the npm registry
(skipped, with the reason, where npm is absent); a Python client not importable here (aider: not on PATH) is
installed from PyPI into a virtual environment of its own under --tools-dir, never into this interpreter. Then,
where it can, the check re-runs itself in a network namespace with only loopback up. Each server's folder
under --out (its log, record, the clients' home and work trees) is emptied first, only where an earlier check
made it. Every wait is bounded (server start, each run; --timeout and --python-timeout finite seconds above
0); the servers are always stopped. Exit status 0 when every client that ran exited 0 each time, got no
4xx/5xx and its repeated request was served cached tokens; 1 when one did not, or its server never started (a
bad --server-flag, a --coding-model that does not load); 2 for a bad flag, an --out that cannot be written or
whose folders hold files no check wrote.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from agent_installs import CODING_AGENTS, PYTHON_AGENTS, install, missing, version
from agent_runs import (
    CODEX_MODEL,
    NETNS_VARIABLE,
    ROOT,
    RUNS,
    Run,
    command,
    free_port,
    in_loopback_netns,
    not_ours,
    prepare,
    run,
    seconds,
    writable_folder,
)

KEY = "sk-kvtestbed-agents-check"
CODING_MODEL = "synthetic:qwen2.5-0.5b"
PYTHON_MODEL = "smollm2-135m"
CLAUDE_MODELS = ["claude-opus-4-8", "claude-haiku-4-5"]  # Claude Code 2.1's default and its small model
# The server flag that caps a reply's length (a synthetic model never stops), by the names it may have.
CAP_FLAGS = ["--max-tokens-cap", "--max-output-tokens", "--max-reply-tokens", "--cap-max-tokens"]
CAP_TOKENS = 32  # a synthetic model's replies (random weights never end one)
PYTHON_CAP_TOKENS = 256  # SmolLM2's: room for a real answer, a bound on a reply that does not end
READY_S = 600.0
SKIPPED_VARIABLE = "KVTESTBED_AGENTS_SKIPPED"
# aider's replies (--replies script:FILE): an edit in its default ("whole") format, a file the chat did not
# add (aider asks, --yes-always answers), then an answer; its commit-message request gets the first line too
AIDER_REPLIES = [
    "README.md\n```\n# demo\n\nA small project for the capture.\n\nEdited by aider (a scripted reply).\n```\n",
    "Done: README.md is edited. (A scripted reply.)",
]
VOLATILE = {"metadata", "prompt_cache_key", "client_metadata", "user", "safety_identifier"}
ACCESS_LINE = re.compile(
    r'"(?P<method>[A-Z]+) (?P<path>[^ ?"]+)(?:\?[^ "]*)? HTTP/[0-9.]+" (?P<status>\d{3})'
)


# Reading what the server wrote (pure: tested in tests/scripts/test_agents_check.py)


def http_statuses(log_text: str) -> Counter[tuple[str, str, int]]:
    """(method, path without query, status) -> count, from uvicorn's access lines."""
    found = (ACCESS_LINE.search(line) for line in log_text.splitlines())
    return Counter((m["method"], m["path"], int(m["status"])) for m in found if m)


def normalized(body: Any) -> Any:
    """A request body without the fields that name the session rather than the prompt, and without the ids
    of Responses input items (Codex's `msg_<uuid>`: a new one each session; no prompt holds them)."""
    if not isinstance(body, dict):
        return body
    out = {k: v for k, v in body.items() if k not in VOLATILE}
    if isinstance(out.get("input"), list):
        out["input"] = [
            {k: v for k, v in i.items() if k != "id"} if isinstance(i, dict) else i for i in out["input"]
        ]
    return out


def cached_and_prompt(line: dict[str, Any]) -> tuple[int | None, int | None]:
    """Cached and prompt tokens of one --record line: its kvtestbed object, else its usage in any API's shape."""
    report = line.get("kvtestbed") or {}
    if "cached_tokens" in report:
        return report["cached_tokens"], report.get("prompt_tokens")
    usage = line.get("usage") or {}
    if "cache_read_input_tokens" in usage:  # Anthropic: input_tokens excludes what was read or written
        parts = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
        return usage["cache_read_input_tokens"], sum(usage.get(k) or 0 for k in parts)
    details = usage.get("prompt_tokens_details") or usage.get("input_tokens_details") or {}
    return details.get("cached_tokens"), usage.get("prompt_tokens", usage.get("input_tokens"))


@dataclass
class Repeat:
    index: int  # of the repeating request among the client's recorded requests (1-based)
    first: int  # of the request it repeats
    cached: int | None
    prompt: int | None


def find_repeat(run1: list[dict[str, Any]], *later: list[dict[str, Any]]) -> Repeat | None:
    """The first request of a later run (A2, else B1: aider's A2 holds the file A1 edited) whose body (less
    per-session fields) equals a request of run 1."""
    seen = [normalized(line.get("body")) for line in run1]
    before = len(run1)
    for requests in later:
        for i, line in enumerate(requests):
            if (body := normalized(line.get("body"))) in seen:
                cached, prompt = cached_and_prompt(line)
                return Repeat(before + i + 1, seen.index(body) + 1, cached, prompt)
        before += len(requests)
    return None


def turn(line: dict[str, Any]) -> str:
    """One recorded request in a few words: cached of prompt tokens, why it missed and where, its tool calls."""
    report = line.get("kvtestbed") or {}
    cached, prompt = cached_and_prompt(line)
    share = f" ({cached / prompt:.0%})" if cached is not None and prompt else ""
    text = f"{cached if cached is not None else '?'}/{prompt if prompt is not None else '?'}{share}"
    if (why := report.get("miss_reason")) not in (None, "hit"):
        div = report.get("divergence") or {}
        where = f" at token {div['token']:,} ({div.get('region')})" if div.get("token") is not None else ""
        text += f" {why}{where}"
    calls = (report.get("tool_calls") or {}).get("calls") or 0
    return (
        text
        + (f", {calls} tool call{'s' * (calls > 1)}" if calls else "")
        + (", aborted" * bool(report.get("aborted")))
    )


@dataclass
class Outcome:
    client: str
    version: str | None = None
    skipped: str | None = None
    failed: str | None = None  # why it could not run where it should have (its server never started)
    runs: list[Run] = field(default_factory=list)
    requests: list[list[dict[str, Any]]] = field(default_factory=list)  # each run's --record lines
    statuses: Counter[tuple[str, str, int]] = field(default_factory=Counter)
    repeat: Repeat | None = None

    @property
    def ok(self) -> bool:
        errors = any(status >= 400 for _, _, status in self.statuses)
        cached = self.repeat is not None and (self.repeat.cached or 0) > 0
        ran = self.skipped is None and self.failed is None
        return ran and all(r.exit == 0 for r in self.runs) and not errors and cached


def report(outcome: Outcome, model: str) -> str:
    """The lines printed for one client."""
    if outcome.skipped:
        return f"{outcome.client}: skipped: {outcome.skipped}"
    if outcome.failed:
        return f"{outcome.client} on {model}: FAILED: {outcome.failed}"
    lines = [f"{outcome.client} {outcome.version} on {model}: {'ok' if outcome.ok else 'FAILED'}"]
    for (label, folder), r, records in zip(RUNS, outcome.runs, outcome.requests, strict=False):
        lines.append(
            f"  {label} (in {folder}/): exit {r.exit} after {r.seconds:.0f} s; last line: {r.last_line[:200]}"
        )
        lines.append(f"    {len(records)} requests: {'; '.join(turn(line) for line in records) or '-'}")
    statuses = ", ".join(f"{m} {p} {s} x{c}" for (m, p, s), c in sorted(outcome.statuses.items())) or "none"
    lines.append(f"  HTTP: {statuses}")
    if outcome.repeat is None:
        recorded = sum(len(r) for r in outcome.requests[1:])
        lines.append(f"  repeat: none of the {recorded} recorded requests of A2 and B1 repeats one of A1")
    else:
        rep = outcome.repeat
        lines.append(
            f"  repeat: request {rep.index} repeats request {rep.first}: "
            f"cached {rep.cached if rep.cached is not None else '?'} of {rep.prompt or '?'} prompt tokens"
        )
    return "\n".join(lines)


# Installing, serving, running


class Server:
    """`python -m engine.serve` in its own process group, its output in `log`; `stop` always ends it."""

    def __init__(self, model: str, names: list[str], out: Path, extra: list[str], tokens: int) -> None:
        self.port, self.log, self.record = free_port(), out / "server.log", out / "record.jsonl"
        self.url = f"http://127.0.0.1:{self.port}"
        argv = [sys.executable, "-m", "engine.serve", "--model", model, "--port", str(self.port)]
        argv += ["--record", str(self.record), "--api-key", KEY, "--default-max-tokens", str(tokens)]
        argv += [f"--served-model-name={n}" for n in names] + extra
        self.argv = argv
        env = os.environ | {"HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
        with self.log.open("w") as f:
            self.process = subprocess.Popen(
                argv, cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True
            )

    def wait_ready(self) -> str | None:
        """None when it answers /metrics, else why not."""
        deadline = time.monotonic() + READY_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                tail = self.log.read_text().strip().splitlines()[-1:] or ["?"]
                return f"the server exited with {self.process.returncode}: {tail[0]}"
            try:
                with urllib.request.urlopen(f"{self.url}/metrics", timeout=5):
                    return None
            except OSError:
                time.sleep(1)
        return f"the server was not ready after {READY_S:.0f} s"

    def mark(self) -> tuple[int, int]:
        """Where the log and the record file end now."""
        size = self.log.stat().st_size if self.log.exists() else 0
        lines = len(self.record.read_text().splitlines()) if self.record.exists() else 0
        return size, lines

    def since(self, mark: tuple[int, int]) -> tuple[str, list[dict[str, Any]]]:
        log = self.log.read_bytes()[mark[0] :].decode(errors="replace")
        lines = self.record.read_text().splitlines()[mark[1] :] if self.record.exists() else []
        return log, [json.loads(line) for line in lines]

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


def reply_flags(tokens: int) -> list[str]:
    """How the server ends its replies, from its --help: scripted replies (`--replies agent`: a tool call the
    client knows, then a short answer) where it has them, else a reply-length cap of `tokens`."""
    done = subprocess.run(
        [sys.executable, "-m", "engine.serve", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if "--replies" in done.stdout:
        return ["--replies=agent"]
    return next(([f"{flag}={tokens}"] for flag in CAP_FLAGS if flag in done.stdout), [])


def prepare_clients(args: argparse.Namespace) -> dict[str, str] | int:
    """Install the missing clients of `args.clients` (once), then re-run this command in a loopback-only
    network namespace where possible: the clients skipped and why, or the exit status of that re-run."""
    if os.environ.get(NETNS_VARIABLE):  # the re-run inside the namespace: the installs are done
        return json.loads(os.environ.get(SKIPPED_VARIABLE, "{}"))
    skipped = (
        missing(args.clients, args.tools_dir) if args.no_install else install(args.clients, args.tools_dir)
    )
    os.environ[SKIPPED_VARIABLE] = json.dumps(skipped)
    if not args.no_netns and (rc := in_loopback_netns()) is not None:
        return rc
    return skipped


def check_client(
    client: str, server: Server, base: Path, args: argparse.Namespace, model: str | None
) -> Outcome:
    planned = command(client, server.url, base, args.tools_dir, KEY, model)
    if isinstance(planned, str):
        return Outcome(client, skipped=planned)
    outcome = Outcome(client, version=version(client, args.tools_dir))
    timeout = args.timeout if client in CODING_AGENTS else args.python_timeout
    for _, folder in RUNS:
        mark = server.mark()
        outcome.runs.append(run(*planned, cwd=base / folder, timeout=timeout))
        time.sleep(1.0)  # the last access line and record are written after the response
        log, lines = server.since(mark)
        outcome.statuses += http_statuses(log)
        outcome.requests.append(lines)
    outcome.repeat = find_repeat(*outcome.requests)
    return outcome


class Group(NamedTuple):
    """The clients one server answers."""

    model: str
    names: list[str]  # the names it serves
    clients: list[str]
    client_model: str | None  # the name the clients ask for (None: each its own default)
    folder: str  # under --out
    tokens: int  # the reply cap, where the server has no scripted replies


def groups(args: argparse.Namespace) -> list[Group]:
    """Claude Code and Codex on --coding-model, the Python clients on SmolLM2, aider on a SmolLM2 server of its
    own (its replies edit a file: aider offers no tools)."""
    coding = [c for c in args.clients if c in CODING_AGENTS]
    python = [c for c in args.clients if c in PYTHON_AGENTS and c != "aider"]
    aider = [c for c in args.clients if c == "aider"]
    folder = re.sub(r"[^A-Za-z0-9._-]+", "-", args.coding_model).strip("-")  # its own, even for a path
    return [
        Group(args.coding_model, CLAUDE_MODELS + [CODEX_MODEL], coding, None, folder, CAP_TOKENS),
        Group(PYTHON_MODEL, [PYTHON_MODEL], python, PYTHON_MODEL, PYTHON_MODEL, PYTHON_CAP_TOKENS),
        Group(PYTHON_MODEL, [PYTHON_MODEL], aider, PYTHON_MODEL, f"{PYTHON_MODEL}-aider", PYTHON_CAP_TOKENS),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--clients", nargs="+", default=CODING_AGENTS + PYTHON_AGENTS, choices=CODING_AGENTS + PYTHON_AGENTS
    )
    parser.add_argument(
        "--tools-dir", type=Path, default=Path.home() / ".cache" / "kvtestbed" / "agent-tools"
    )
    parser.add_argument("--out", type=Path, default=Path("/tmp/kvtestbed-agents-check"))
    parser.add_argument("--no-install", action="store_true", help="only find the clients, install nothing")
    parser.add_argument("--timeout", type=seconds, default=900.0, help="seconds per Claude Code / Codex run")
    parser.add_argument("--python-timeout", type=seconds, default=300.0, help="seconds per Python client run")
    parser.add_argument(
        "--server-flag", action="append", default=[], help="an extra engine.serve flag (repeatable)"
    )
    parser.add_argument(
        "--coding-model",
        default=CODING_MODEL,
        help=f"the model Claude Code and Codex are served (default {CODING_MODEL}; a 32k context)",
    )
    parser.add_argument("--no-netns", action="store_true", help="do not isolate the clients' network")
    args = parser.parse_args(argv)
    writable_folder(parser, "--out", args.out)
    for why in filter(None, (not_ours(args.out / g.folder) for g in groups(args) if g.clients)):
        parser.error(f"--out: {why}")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the servers are stopped on a kill too
    skipped = prepare_clients(args)
    if isinstance(skipped, int):  # the run in the namespace is over: its exit status
        return skipped
    outcomes: list[tuple[Outcome, str]] = []
    for model, names, clients, client_model, folder, tokens in groups(args):
        runnable = [c for c in clients if c not in skipped]
        outcomes += [(Outcome(c, skipped=skipped[c]), model) for c in clients if c in skipped]
        if not runnable:
            continue
        out = args.out / folder
        prepare(out)
        replies = reply_flags(tokens)
        if runnable == ["aider"] and replies == ["--replies=agent"]:  # aider offers no tools: its edit format
            (out / "aider-replies.jsonl").write_text("".join(json.dumps(r) + "\n" for r in AIDER_REPLIES))
            replies = [f"--replies=script:{out / 'aider-replies.jsonl'}"]
        print(f"replies: {' '.join(replies) if replies else f'no cap (only --default-max-tokens {tokens})'}")
        server = Server(model, names, out, replies + args.server_flag, tokens)
        try:
            print(f"server: {' '.join(server.argv[1:])}", flush=True)
            if (why := server.wait_ready()) is not None:  # a failure, not a skip: exit 1
                outcomes += [(Outcome(c, failed=why), model) for c in runnable]
                print(f"error: {why} (log: {server.log})", file=sys.stderr, flush=True)
                continue
            for client in runnable:
                outcome = check_client(client, server, out, args, client_model)
                outcomes.append((outcome, model))
                print(report(outcome, model), flush=True)
        finally:
            server.stop()
    print("\nsummary:")
    for outcome, model in outcomes:
        print(
            report(outcome, model)
            if outcome.skipped or outcome.failed
            else f"  {outcome.client}: {'ok' if outcome.ok else 'FAILED'}"
        )
    return 0 if all(o.ok for o, _ in outcomes if not o.skipped) else 1


if __name__ == "__main__":
    raise SystemExit(main())
