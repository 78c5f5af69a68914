"""`python -m engine.bench replay`: the run (its description and flags: engine/bench/flags/replay.py)."""

from __future__ import annotations

import argparse
import sys

from engine.bench.args import open_engine, read_traces
from engine.bench.harness.hash_analysis import run_hash_analysis
from engine.bench.harness.replayer import Conversation, Replayer, Request, finished_turns
from engine.bench.harness.trace_analysis import run_analysis
from engine.bench.reporting.replay_plots import plot_cached_share, plot_token_strip, plot_ttft
from engine.bench.reporting.replay_report import summarize_turns, table, write_results
from engine.bench.reporting.results import environment
from engine.bench.reporting.run_folder import interrupted, run_dir, written
from engine.errors import TraceError
from engine.traces.analysis import replies
from engine.traces.providers.registry import ALL, rule_names
from engine.traces.request import TraceRequest
from engine.traces.tool_calls import unanswered_notes

TURN_COLUMNS = [
    "turn",
    "prompt_tokens",
    "cached_tokens",
    "computed_tokens",
    "cached_share",
    "ttft_s",
    "cold_ttft_s",
    "first_divergence",
    "divergence_region",
    "first_change",
    "change_region",
    "change_context",
]


def main(args: argparse.Namespace) -> int:
    inputs = read_traces(args)
    if inputs.hash_traces:
        if inputs.requests or not args.analyze or args.endpoint is not None:
            raise TraceError(
                "hash-id traces hold no text: analyze them alone, with --analyze (and --pressure)"
            )
        return run_hash_analysis(args, inputs.hash_traces)
    requests = inputs.requests
    if not requests:
        raise TraceError(
            "these traces hold no requests: " + ("; ".join(inputs.notes) or "nothing to analyze")
        )
    if not args.analyze:  # sent as rebuilt: say which requests a provider would refuse
        for note in unanswered_notes(requests):
            print(f"[{note}]", file=sys.stderr)
    if args.endpoint is not None:
        if not all(r.messages for r in requests):
            raise TraceError(
                "these traces hold usage only for some requests (no content to send): replay them "
                "with --analyze"
            )
        from engine.bench.commands.replay_endpoint import replay_endpoint  # the SDKs load only here

        return replay_endpoint(args, requests)
    if args.concurrency is not None or args.request_rate is not None or args.router is not None:
        raise TraceError(
            "--concurrency, --request-rate and --router pace and route requests to live servers: add --endpoint URL"
        )
    if args.analyze:
        return run_analysis(args, requests, rule_names(args.rules or ALL), inputs.notes)
    if args.rules is not None or args.pressure or args.hidden_prefix_tokens is not None:
        raise TraceError(
            "--rules, --pressure and --hidden-prefix-tokens are analyses without a model: add --analyze"
        )
    if not all(r.messages for r in requests):
        raise TraceError(
            "these traces hold usage only for some requests (no content to replay): add --analyze"
        )
    sessions = list(dict.fromkeys(r.session for r in requests))
    if len(sessions) > 1:
        raise TraceError(
            f"a full replay takes one session, these traces hold {len(sessions)} "
            f"({', '.join(sessions[:3])}...): replay one, or analyze them together with --analyze"
        )
    return replay(args, requests)


def replay(args: argparse.Namespace, trace: list[TraceRequest]) -> int:
    engine = open_engine(args)
    requests = [Request(r.messages, r.tools) for r in trace]
    following = replies(trace)
    conv = Conversation("trace", lambda t, _replies: requests[t], lambda t: following[t])
    replayer = Replayer(engine, args.repeats)
    records, partial = finished_turns(lambda: replayer.run([conv], len(requests), desc="replay"))
    if partial and not records:
        return interrupted(0, "turns", None)
    name = trace[0].session
    out = run_dir(args, f"replay-{name}", engine)
    # -1 (the prompt only extended the previous one) shows as "-"
    rows = [r.row() | {"first_change": r.first_change if r.first_change >= 0 else None} for r in records]
    notes = [
        "Per request: the token where reuse ended (`first_divergence`, block-aligned, and its region), "
        "where the prompt first differs from the previous request plus its reply (`first_change`, "
        "`change_region`, `change_context`: ⟂ marks the spot; - when it only extended it).",
        "",
        table(rows, TURN_COLUMNS),
    ]
    plot_ttft(records, out / "ttft_per_turn.png", f"TTFT per request: {name}")
    plot_cached_share(records, out / "cached_share.png", f"Cached share per request: {name}")
    plot_token_strip(
        records, records[-1].turn, out / "token_strip.png", "Where reuse ends on the last request"
    )
    plots = [
        ("ttft_per_turn.png", "TTFT per request"),
        ("cached_share.png", "cached share per request"),
        ("token_strip.png", "token strip, last request"),
    ]
    env = environment(engine, "replay", args, partial)
    summary = summarize_turns(records, "trace")
    write_results(out, f"Trace replay: {name}", env, records, summary, notes, plots, passes=replayer.passes)
    print(table(rows, TURN_COLUMNS))
    if partial:
        return interrupted(len(records), "turns", out)
    return written(out)
