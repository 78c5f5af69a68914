"""`python -m engine.bench replay TRACE.json`: replay your own agent's requests and see, turn by turn,
where prefix reuse ended and what it cost.

TRACE.json is a JSON list with one entry per request: a list of chat messages (OpenAI format, tool
calls included), or {"messages": [...], "tools": [...]}. The assistant message that the next request
carries at the end of this one's messages is taken as this request's reply: its blocks are cached as
if the engine had generated it, as a serving engine would have.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from engine.bench.machinery.args import add_bench_args, environment, open_engine, run_dir, table
from engine.bench.machinery.plots import plot_cached_share, plot_token_strip, plot_ttft
from engine.bench.machinery.replayer import Conversation, Replayer, Request
from engine.bench.machinery.report import summarize, write_results
from engine.chat import Message, validate_messages
from engine.errors import PromptError, TraceError

TURN_COLUMNS = ["turn", "prompt_tokens", "cached_tokens", "computed_tokens", "cached_share", "ttft_s",
                "cold_ttft_s", "change_region", "change_context"]  # fmt: skip


def register(commands: Any) -> None:
    p = commands.add_parser("replay", help="replay your own trace: where reuse ended, turn by turn",
                            description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("trace", type=Path, help="JSON list of per-request message lists")
    add_bench_args(p)
    p.set_defaults(func=main)


def _parsed_arguments(message: Message) -> Message:
    """OpenAI sends tool-call arguments as a JSON string; chat templates expect an object (as vLLM does)."""
    if not message.get("tool_calls"):
        return message
    calls = []
    for call in message["tool_calls"]:
        fn = dict(call.get("function", call))
        if isinstance(fn.get("arguments"), str):
            try:
                fn["arguments"] = json.loads(fn["arguments"])
            except json.JSONDecodeError:
                pass  # not JSON: the template renders the string as it is
        calls.append({**call, "function": fn} if "function" in call else fn)
    return {**message, "tool_calls": calls}


def load_trace(path: Path) -> list[Request]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise TraceError(f"trace file {path} does not exist") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise TraceError(f"trace file {path} is not valid JSON: {e}") from None
    if not isinstance(data, list) or not data:
        raise TraceError(f"{path}: expected a non-empty JSON list of requests")
    requests = []
    for i, entry in enumerate(data):
        messages, tools = (entry.get("messages"), entry.get("tools")) if isinstance(entry, dict) else (entry, None)
        if not isinstance(messages, list):
            raise TraceError(f"{path}: request {i + 1} is neither a message list nor an object with 'messages'")
        try:
            validate_messages(messages)
        except PromptError as e:
            raise TraceError(f"{path}: request {i + 1}: {e}") from None
        requests.append(Request([_parsed_arguments(m) for m in messages], tools))
    return requests


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
    notes = ["Per request: where the prompt first differs from the previous request plus its reply "
             "(`change_region`, `change_context`: ⟂ marks the spot), and what reuse that left.", "",
             table(rows, TURN_COLUMNS)]  # fmt: skip
    plot_ttft(records, out / "ttft_per_turn.png", f"TTFT per request: {args.trace.name}")
    plot_cached_share(records, out / "cached_share.png", f"Cached share per request: {args.trace.name}")
    plot_token_strip(records, len(records), out / "token_strip.png", "Where reuse ends on the last request")
    write_results(out, f"Trace replay: {args.trace.name}", environment(engine, "replay", args), records,
                  summarize(records, "trace"), notes,
                  [("ttft_per_turn.png", "TTFT per request"), ("cached_share.png", "cached share per request"),
                   ("token_strip.png", "token strip, last request")])  # fmt: skip
    print(table(rows, TURN_COLUMNS))
    print(f"results: {out}")
    return 0
