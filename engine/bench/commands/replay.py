"""`python -m engine.bench replay TRACE.json`: replay your own agent's requests and see, turn by turn,
where prefix reuse ended and what it cost.

TRACE.json is a JSON list with one entry per request: a list of chat messages (OpenAI format, tool
calls included), or {"messages": [...], "tools": [...]}. The assistant message that the next request
carries at the end of this one's messages is taken as this request's reply: its blocks are cached as
if the engine had generated it, as a serving engine would have.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from engine.bench.machinery.args import add_bench_args, open_engine
from engine.bench.machinery.plots import plot_cached_share, plot_token_strip, plot_ttft
from engine.bench.machinery.replayer import Conversation, Replayer, Request
from engine.bench.machinery.report import summarize, table, write_results
from engine.bench.machinery.results import environment, run_dir
from engine.chat import Message
from engine.traces.openai_chat import read_trace

TURN_COLUMNS = [
    "turn",
    "prompt_tokens",
    "cached_tokens",
    "computed_tokens",
    "cached_share",
    "ttft_s",
    "cold_ttft_s",
    "change_region",
    "change_context",
]


def register(commands: Any) -> None:
    p = commands.add_parser(
        "replay",
        help="replay your own trace: where reuse ended, turn by turn",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("trace", type=Path, help="JSON list of per-request message lists")
    add_bench_args(p)
    p.set_defaults(func=main)


def load_trace(path: Path) -> list[Request]:
    """The trace's requests (today's OpenAI-chat format), as the replayer takes them."""
    return [Request(r.messages, r.tools) for r in read_trace(path)]


def main(args: argparse.Namespace) -> int:
    requests = load_trace(args.trace)
    engine = open_engine(args)

    def reply(t: int) -> Message | None:
        n = len(requests[t].messages)
        following = requests[t + 1].messages if t + 1 < len(requests) else []
        return following[n] if len(following) > n and following[n]["role"] == "assistant" else None

    conv = Conversation("trace", lambda t, _replies: requests[t], reply)
    records = Replayer(engine, args.repeats).run([conv], len(requests), desc="replay")
    out = run_dir(args, f"replay-{args.trace.stem}", engine)
    rows = [r.row() for r in records]
    notes = [
        "Per request: where the prompt first differs from the previous request plus its reply "
        "(`change_region`, `change_context`: ⟂ marks the spot), and what reuse that left.",
        "",
        table(rows, TURN_COLUMNS),
    ]
    plot_ttft(records, out / "ttft_per_turn.png", f"TTFT per request: {args.trace.name}")
    plot_cached_share(records, out / "cached_share.png", f"Cached share per request: {args.trace.name}")
    plot_token_strip(records, len(records), out / "token_strip.png", "Where reuse ends on the last request")
    plots = [
        ("ttft_per_turn.png", "TTFT per request"),
        ("cached_share.png", "cached share per request"),
        ("token_strip.png", "token strip, last request"),
    ]
    env = environment(engine, "replay", args)
    summary = summarize(records, "trace")
    write_results(out, f"Trace replay: {args.trace.name}", env, records, summary, notes, plots)
    print(table(rows, TURN_COLUMNS))
    print(f"results: {out}")
    return 0
