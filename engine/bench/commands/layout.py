"""`python -m engine.bench layout`: the run (its description and flags: engine/bench/flags/layout.py)."""

from __future__ import annotations

import argparse
import functools
import sys
from typing import Any

from tqdm import tqdm

from engine.bench.args import open_engine
from engine.bench.flags.layout import REPLIES
from engine.bench.harness.replayer import Conversation, Replayer, TurnRecord, finished_turns
from engine.bench.reporting.replay_plots import plot_cached_share, plot_token_strip, plot_ttft
from engine.bench.reporting.replay_report import (
    SUMMARY_COLUMNS,
    markdown_text,
    summarize_turns,
    table,
    write_results,
)
from engine.bench.reporting.results import environment
from engine.bench.reporting.run_folder import interrupted, run_dir, written
from engine.bench.workloads.layout_traces import write_layout_traces
from engine.bench.workloads.layouts import LAYOUTS
from engine.bench.workloads.scenario import Scenario, build_scenario
from engine.errors import InvalidArgumentError
from engine.runtime.engine import Engine


def conversations(sc: Scenario, names: list[str], replies: str) -> list[Conversation]:
    """One conversation per layout, the baseline (stable-first if present) first; `replies` is a key of
    REPLIES."""
    baseline = "stable-first" if "stable-first" in names else names[0]
    return [
        Conversation(
            name,
            functools.partial(LAYOUTS[name], sc),
            (lambda t: sc.turns[t].reply) if replies == "scripted" else None,
            baseline if replies == "reference" and name != baseline else None,
        )
        for name in [baseline] + [n for n in names if n != baseline]
    ]


def plan_line(engine: Engine, layouts: int, turns: int, repeats: int) -> str:
    """What the run will do, printed before it starts (its length is known after the first pass)."""
    quick = (
        "; `--repeats 1` is the quick look (one pass, too few for verdicts)"
        if repeats > 1
        else " (a quick look)"
    )
    return (
        f"layout: {layouts} layouts x {turns} turns x {repeats} pass{'es' if repeats > 1 else ''} on "
        f"{engine.info['model']} ({engine.info['dtype']}, {engine.info['device']}), each turn a warm request "
        f"and its cold baseline; the first pass's table and the time the rest will take come after pass 1"
        f"{quick}"
    )


def first_pass_table(
    done: int, records: list[TurnRecord], wall_s: float, baseline: str, repeats: int, out: Any = None
) -> None:
    """After the first pass: its table (one pass, so no verdicts yet) and how long the other passes will
    take, judged by this one (later passes teacher-force the replies the first one wrote, so take no
    longer). Later passes print nothing: the progress bar shows them."""
    if done != 0:
        return
    left = repeats - 1
    rest = (
        f"; the other {left} pass{'es' if left > 1 else ''} take about {clock(wall_s * left)} "
        f"(at most this pass's {clock(wall_s)} each)"
        if left
        else ""
    )
    tqdm.write(
        f"\nPass 1 of {repeats} took {clock(wall_s)}{rest}. Its table (one pass: too few passes for a "
        f"verdict):\n{table(summarize_turns(records, baseline), SUMMARY_COLUMNS)}\n",
        file=out or sys.stderr,
    )


def clock(seconds: float) -> str:
    """`1 min 58 s`, `42 s`."""
    m, s = divmod(round(seconds), 60)
    return f"{m} min {s} s" if m else f"{s} s"


def main(args: argparse.Namespace) -> int:
    if args.endpoint is not None:
        from engine.bench.commands.layout_endpoint import layout_endpoint  # the SDKs load only here

        if args.replies != "reference":
            raise InvalidArgumentError(
                "--endpoint carries the scripted replies in every layout: drop --replies"
            )
        return layout_endpoint(args)
    if args.cache_salt:
        raise InvalidArgumentError("--cache-salt isolates conversations on a live server: add --endpoint URL")
    if args.write_traces is not None:
        return write_traces(args)
    engine = open_engine(args)
    sc = build_scenario(engine.tokenizer, args.scale, args.seed, args.turns)
    convs = conversations(sc, args.layouts, args.replies)
    baseline = convs[0].name
    print(plan_line(engine, len(convs), len(sc.turns), args.repeats), file=sys.stderr)
    on_pass = functools.partial(first_pass_table, baseline=baseline, repeats=args.repeats)
    replayer = Replayer(engine, args.repeats, sc.reply_tokens, on_pass=on_pass)
    records, partial = finished_turns(lambda: replayer.run(convs, len(sc.turns), desc="layout"))
    if partial and not records:
        return interrupted(0, "turns", None)
    summary = summarize_turns(records, baseline)

    out = run_dir(args, "layout", engine)
    env = environment(engine, "layout", args, partial)
    last = max(r.turn for r in records)
    where = [
        f"- `{r.conversation}`: reuse ended at token {r.first_divergence} of {r.prompt_tokens} "
        f"(in {r.divergence_region}); "
        + (
            f"the prompt first changed at token {r.first_change} "
            f"(in {r.change_region}): {markdown_text(r.change_context)}"
            if r.first_change >= 0
            else "the prompt only extended the previous request and its reply"
        )
        for r in records
        if r.turn == last
    ]
    replies = f"{args.replies}: " + REPLIES[args.replies].replace("the reference layout", f"`{baseline}`")
    notes = [
        f"Replies: {replies}.",
        "",
        "Summary over turns 2+ (turn 1 is a cold start in every layout); `ttft_ratio` is relative to "
        f"`{baseline}`, measured in the same run; the layouts' order within a turn rotates from pass to pass. "
        "Cold TTFT: the same prompt with no cache, under a salt of its own (same path, no hit), run after "
        "the warm request in one pass and before it in the next (`cold_first_passes` in turns.json).",
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
    confounded = (
        " (CONFOUNDED: each layout wrote its own replies)" if args.replies == "own-confounded" else ""
    )
    write_results(
        out,
        f"Layout replay, {args.scale} scale{confounded}",
        env,
        records,
        summary,
        notes,
        plots,
        {"scenario": {"scale": args.scale, "turns": last, "tools": len(sc.tools), "replies": args.replies}},
        replayer.passes,
    )
    print(table(summary, SUMMARY_COLUMNS))
    if confounded:
        print(f"warning: --replies own-confounded{confounded}", file=sys.stderr)
    if engine.source.synthetic:
        print("(synthetic random weights: the timings are real, the replies are not)", file=sys.stderr)
    if partial:
        return interrupted(len(records), "turns", out)
    return written(out)


def write_traces(args: argparse.Namespace) -> int:
    """--write-traces: the scenario built with the model's tokenizer only, each layout written out."""
    from engine.bench.harness.trace_analysis import open_tokenizer

    taken = [args.write_traces / f"{name}.jsonl" for name in args.layouts]
    if any(p.exists() for p in taken) and not args.overwrite:
        raise InvalidArgumentError(
            f"--write-traces {args.write_traces}: {next(p for p in taken if p.exists()).name} exists "
            "(pass --overwrite to replace it)"
        )
    _, tokenizer = open_tokenizer(args)
    sc = build_scenario(tokenizer, args.scale, args.seed, args.turns)
    for name, path in write_layout_traces(sc, args.layouts, args.write_traces).items():
        print(f"{name}: {path}")
    return 0
