"""`python -m engine.bench layout`: TTFT and cached tokens per turn, stable-first against cache-breaking
layouts."""

from __future__ import annotations

import argparse
import functools
import sys
from typing import Any

from engine.bench.machinery.args import add_bench_args, open_engine
from engine.bench.machinery.plots import plot_cached_share, plot_token_strip, plot_ttft
from engine.bench.machinery.replayer import Conversation, Replayer
from engine.bench.machinery.report import SUMMARY_COLUMNS, summarize, table, write_results
from engine.bench.machinery.results import environment, run_dir
from engine.bench.workloads.layouts import LAYOUTS
from engine.bench.workloads.scenario import SCALES, build_scenario


def register(commands: Any) -> None:
    p = commands.add_parser(
        "layout", help="stable-first vs timestamp-first and other cache-breaking layouts", description=__doc__
    )
    add_bench_args(p)
    p.add_argument(
        "--layouts",
        nargs="+",
        choices=list(LAYOUTS),
        default=list(LAYOUTS),
        metavar="LAYOUT",
        help=f"layouts to compare (default: all of {', '.join(LAYOUTS)})",
    )
    p.add_argument("--scale", choices=list(SCALES), default="small", help="prompt sizes (large is for GPUs)")
    p.add_argument("--turns", type=int, default=None, help="turns per conversation (default: the scale's)")
    p.add_argument(
        "--replies",
        choices=["model", "scripted"],
        default="model",
        help="model: the model's short reply joins the history; scripted: fixed replies, reproducible "
        "across models",
    )
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    engine = open_engine(args)
    sc = build_scenario(engine.tokenizer, args.scale, args.seed, args.turns)
    baseline = "stable-first" if "stable-first" in args.layouts else args.layouts[0]
    layouts = [baseline] + [name for name in args.layouts if name != baseline]
    conversations = [
        Conversation(
            name,
            functools.partial(LAYOUTS[name], sc),
            (lambda t: sc.turns[t].reply) if args.replies == "scripted" else None,
        )
        for name in layouts
    ]
    records = Replayer(engine, args.repeats, sc.reply_tokens).run(conversations, len(sc.turns), desc="layout")
    summary = summarize(records, baseline)

    out = run_dir(args, "layout", engine)
    env = environment(engine, "layout", args)
    last = len(sc.turns)
    where = [
        f"- `{r.conversation}`: reuse ended at token {r.first_divergence} of {r.prompt_tokens} "
        f"(in {r.divergence_region}); "
        + (
            f"the prompt first changed at token {r.first_change} "
            f"(in {r.change_region}): `{r.change_context!r}`"
            if r.first_change >= 0
            else "the prompt only extended the previous request and its reply"
        )
        for r in records
        if r.turn == last
    ]
    notes = [
        "Summary over turns 2+ (turn 1 is a cold start in every layout); `ttft_ratio` is relative to "
        f"`{baseline}`, measured in the same run.",
        "",
        f"Where reuse ended on turn {last}:",
        *where,
    ]
    title = f"{engine.info['model']} ({engine.info['dtype']}, {engine.info['device']})"
    plot_ttft(records, out / "ttft_per_turn.png", f"TTFT per turn: {title}")
    plot_cached_share(records, out / "cached_share.png", f"Cached share per turn: {title}")
    plot_token_strip(records, last, out / "token_strip.png", f"Where reuse ends on turn {last}: {title}")
    plots = [
        ("ttft_per_turn.png", "TTFT per turn"),
        ("cached_share.png", "cached share per turn"),
        ("token_strip.png", f"token strip, turn {last}"),
    ]
    write_results(
        out,
        f"Layout replay, {args.scale} scale",
        env,
        records,
        summary,
        notes,
        plots,
        {"scenario": {"scale": args.scale, "turns": last, "tools": len(sc.tools), "replies": args.replies}},
    )
    print(table(summary, SUMMARY_COLUMNS))
    if engine.source.synthetic:
        print("(synthetic random weights: the timings are real, the replies are not)", file=sys.stderr)
    print(f"results: {out}")
    return 0
