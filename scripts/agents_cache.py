"""What real agents do to a prefix cache, measured on `python -m engine.serve`: Claude Code and Codex each run
twice in one directory and once in another against one server, and the server's own reports say, per request,
how much of the prompt the cache served and where and why the prompt broke; per client, what the chat
template's order costs the run in the other directory.

    python scripts/agents_cache.py [--clients claude-code codex] [--tools-dir DIR] [--out DIR [--overwrite]]
                                   [--work DIR] [--timeout S] [--coding-model M]

The server runs `synthetic:qwen2.5-0.5b`: Qwen2.5's tokenizer and chat template, so every token count is what
a real Qwen2.5 would be served (the cache's facts do not depend on the weights); its random weights never stop,
so the replies are scripted (`--replies agent`: a tool call each client knows, then a short answer, forced
through the engine), and every session runs whole. `--coding-model` serves another model
(`synthetic:qwen2.5-tiny`, 2 random layers of width 64 under Qwen2.5's tokenizer, template and 32k context,
where the CPU is too slow for a 21k-token prefill of 0.5B: the same token counts). The clients
are installed and configured as in scripts/agents_check.py (documented settings only, a loopback-only network
namespace where possible; the server's log and record and the clients' work trees go to `--work`). Writes
`<out>/requests.csv` (one row per request) and `<out>/report.md` (existing ones only with `--overwrite`;
it opens with the commit and the machine's load when the run started and ended), and prints the report.
Template order: Qwen's template renders the tool definitions after the system text, Anthropic's API puts
tools first; where a prompt breaks inside the system text before its tools, and the tools are the same
as those of the request it is compared with, a tools-first order would have served those tool tokens too
(an estimate from the regions the server reports, in whole blocks).
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import signal
import sys
import time
import urllib.request
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's engine: its commit and the machine's load for the report
from agent_installs import CODING_AGENTS  # noqa: E402
from agent_runs import (  # noqa: E402
    CODEX_MODEL,
    RUNS,
    claim,
    command,
    not_ours,
    prepare,
    run,
    seconds,
    writable_folder,
)
from agents_check import (  # noqa: E402
    CAP_TOKENS,
    CLAUDE_MODELS,
    CODING_MODEL,
    KEY,
    Server,
    prepare_clients,
    reply_flags,
)

from engine.machine_load import AT_START, load_averages  # noqa: E402  (the load when this run started)


@dataclass
class Row:
    client: str
    run: str
    request: int  # within the run, from 1
    path: str
    prompt_tokens: int
    cached_tokens: int
    miss_reason: str
    break_token: int | None  # where the prompt first differs from the one it is compared with
    break_region: str
    break_text: str
    tool_tokens_after_break: int  # tool-definition tokens rendered after that point (Qwen's order)
    tools_first_cached: int | None  # the estimate for a tools-first order, where it applies
    tool_calls: int = 0  # in the reply

    @property
    def share(self) -> float:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


def row(
    client: str, run: str, n: int, entry: dict[str, Any], body: dict[str, Any], earlier: dict[str, Any]
) -> Row:
    """One request's row from the live page's entry (the kvtestbed object and the prompt's regions), its body,
    and the bodies of the client's earlier requests by request id."""
    div = entry.get("divergence") or {}
    at = div.get("token")
    regions = entry.get("regions") or []
    tools = sum(
        end - max(start, at)
        for _, kind, start, end in regions
        if kind == "tools" and at is not None and end > at
    )
    previous = earlier.get(entry.get("previous_request_id") or "")
    same_tools = previous is not None and previous.get("tools") == body.get("tools")
    estimate = None
    if at is not None and tools and same_tools:
        block = entry["block_size"]
        estimate = min(entry["prompt_tokens"], (at + tools) // block * block)
    return Row(
        client,
        run,
        n,
        entry.get("api", ""),
        entry["prompt_tokens"],
        entry["cached_tokens"],
        entry.get("miss_reason") or "hit",
        at,
        div.get("region", ""),
        " ".join((div.get("text") or "").split())[:120],
        tools,
        estimate,
    )


def fetch_entries(url: str) -> list[dict[str, Any]]:
    request = urllib.request.Request(f"{url}/v1/kvtestbed/requests?after=0", headers={"x-api-key": KEY})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)["requests"]


def opening(model: str) -> list[str]:
    """The report's first lines, as every result's: the model served, the commit it came from, and the
    machine's load when the run started and ended (a busy machine's seconds are not reference timings; the
    token counts, cached tokens and miss reasons do not depend on the load)."""
    from engine.bench.reporting.results import git_commit, provenance  # torch: only once the run is over

    date = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    env = {"commit": git_commit(), "date": date, "load_average_at_start": AT_START}
    end = load_averages()
    ended = "" if end is None else " / ".join(f"{x:.2f}" for x in end)
    return [
        f"# Claude Code and Codex through the prefix cache: `{model}`",
        "",
        *provenance(env),
        *([f"- load average when it ended {ended} (1/5/15 min)"] if ended else []),
        "- the seconds are the clients' wall time; the token counts and miss reasons do not depend on the load",
        "",
    ]


def report(rows: list[Row], lines: list[str]) -> str:
    out = [
        *lines,
        "",
        "| client | run | # | prompt | cached | share | why | breaks at | region | tools after | calls |",
    ]
    out.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        at = "" if r.break_token is None else f"{r.break_token:,}"
        out.append(
            f"| {r.client} | {r.run} | {r.request} | {r.prompt_tokens:,} | {r.cached_tokens:,} | {r.share:.0%} | "
            f"{r.miss_reason} | {at} | {r.break_region} | {r.tool_tokens_after_break:,} | {r.tool_calls} |"
        )
    for client in dict.fromkeys(r.client for r in rows):
        mine = [r for r in rows if r.client == client]
        for label, _ in RUNS:
            run_rows = [r for r in mine if r.run == label]
            prompt, cached = sum(r.prompt_tokens for r in run_rows), sum(r.cached_tokens for r in run_rows)
            if run_rows:
                out.append(
                    f"\n{client} {label}: {len(run_rows)} requests, {cached:,} of {prompt:,} prompt tokens cached ({cached / max(prompt, 1):.0%})"
                )
        for r in (r for r in mine if r.tools_first_cached is not None):
            out.append(
                f"{client} {r.run} #{r.request}: breaks at token {r.break_token:,} ({r.break_region}) before "
                f"{r.tool_tokens_after_break:,} tool-definition tokens identical to the compared request's: "
                f"cached {r.cached_tokens:,} in Qwen's order, about {r.tools_first_cached:,} with tools first"
            )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", nargs="+", default=CODING_AGENTS, choices=CODING_AGENTS)
    parser.add_argument(
        "--tools-dir", type=Path, default=Path.home() / ".cache" / "kvtestbed" / "agent-tools"
    )
    parser.add_argument(
        "--out", type=Path, default=Path("results/agents-cache"), help="report.md, requests.csv"
    )
    parser.add_argument("--overwrite", action="store_true", help="replace an earlier report.md, requests.csv")
    parser.add_argument(
        "--work",
        type=Path,
        default=Path("/tmp/kvtestbed-agents-cache"),
        help="server log, record, work trees",
    )
    parser.add_argument("--timeout", type=seconds, default=900.0, help="seconds per client run")
    parser.add_argument(
        "--coding-model",
        default=CODING_MODEL,
        help=f"the model served (default {CODING_MODEL}; a 32k context with Qwen's tokenizer and template)",
    )
    parser.add_argument("--no-install", action="store_true")
    parser.add_argument("--no-netns", action="store_true")
    args = parser.parse_args(argv)
    written = [args.out / "report.md", args.out / "requests.csv"]
    if not args.overwrite and any(p.exists() for p in written):
        parser.error(f"{args.out} already holds report.md or requests.csv; pass --overwrite to replace them")
    writable_folder(parser, "--out", args.out)
    writable_folder(parser, "--work", args.work)
    for why in filter(None, (not_ours(args.work / f) for f in ["server", *args.clients])):
        parser.error(f"--work: {why}")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the server is stopped on a kill too
    skipped = prepare_clients(args)
    if isinstance(skipped, int):  # the run in the namespace is over: its exit status
        return skipped
    clients = [c for c in args.clients if c not in skipped]
    lines = [f"{c}: skipped: {skipped[c]}" for c in args.clients if c in skipped]
    if not clients:  # nothing would run: no server, no report of nothing
        print(f"error: no client to run: {'; '.join(lines)}", file=sys.stderr)
        return 1
    claim(args.work / "server")
    server = Server(
        args.coding_model,
        CLAUDE_MODELS + [CODEX_MODEL],
        args.work / "server",
        reply_flags(CAP_TOKENS),
        CAP_TOKENS,
    )
    rows: list[Row] = []
    try:
        lines.append(f"server: {' '.join(server.argv[1:])}")
        if (why := server.wait_ready()) is not None:
            print(f"error: {why}", file=sys.stderr)
            return 1
        for client in clients:
            bodies: dict[str, dict[str, Any]] = {}
            base = args.work / client
            prepare(base)  # one home (the client's own state, as a user's), two copies of the repository
            for label, folder in RUNS:
                planned = command(client, server.url, base, args.tools_dir, KEY)
                assert not isinstance(planned, str), planned  # installed: found above
                mark = server.mark()
                done = run(*planned, cwd=base / folder, timeout=args.timeout)
                time.sleep(1.0)  # the last record is written after the response
                lines.append(
                    f"{client} {label} (in {folder}/): `{done.command}` exit {done.exit} after "
                    f"{done.seconds:.0f} s; last line: {done.last_line[:160]}"
                )
                _, records = server.since(mark)
                entries = {e["request_id"]: e for e in fetch_entries(server.url)}
                for n, record in enumerate(records, 1):
                    entry = entries[record["kvtestbed"]["request_id"]]
                    calls = (record["kvtestbed"].get("tool_calls") or {}).get("calls") or 0
                    rows.append(
                        replace(row(client, label, n, entry, record["body"], bodies), tool_calls=calls)
                    )
                    bodies[entry["request_id"]] = record["body"]
    finally:
        server.stop()
    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / "requests.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=[*asdict(rows[0]).keys(), "share"] if rows else ["client"])
        writer.writeheader()
        writer.writerows(asdict(r) | {"share": round(r.share, 4)} for r in rows)
    text = report(rows, [*opening(args.coding_model), *lines])
    (args.out / "report.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
