"""`python -m engine.bench statusbar`: status-bar layouts replayed through the engine, and the
replace-vs-append cost model tested against measurement over a sweep of S, R and N."""

from __future__ import annotations

import argparse
import itertools
from typing import Any

from engine.bench.machinery.args import add_bench_args, open_engine
from engine.bench.machinery.plots import plot_cached_share, plot_cumulative, plot_sweep, plot_token_strip
from engine.bench.machinery.replayer import Conversation, Replayer, TurnRecord, reply_tokens
from engine.bench.machinery.report import SUMMARY_COLUMNS, summarize, table, write_results
from engine.bench.machinery.results import environment, run_dir, write_csv
from engine.bench.workloads.agent_status import (
    STATUS_LAYOUTS,
    Trajectory,
    build_trajectory,
    call_message,
    render_status,
    status_request,
)
from engine.bench.workloads.costs import (
    append_extra_tokens,
    break_even_between,
    measure_token_costs,
    replace_extra_tokens,
)
from engine.engine import Engine

SWEEP_COLUMNS = [
    "status_tokens",
    "between_tokens",
    "updates",
    "alpha",
    "c_ms_per_token",
    "measured_ms",
    "predicted_ms",
    "break_even_between",
    "append_wins_measured",
    "append_wins_predicted",
]


def register(commands: Any) -> None:
    p = commands.add_parser(
        "statusbar",
        help="status bar: replace vs append vs in-system, and the cost model",
        description=__doc__,
    )
    add_bench_args(p)
    p.add_argument("--steps", type=int, default=8, help="status updates N in the main run (default 8)")
    p.add_argument("--status-tokens", type=int, default=150, help="status size S in tokens (default 150)")
    p.add_argument(
        "--between-tokens",
        type=int,
        default=60,
        help="R: the agent's own tokens between two updates (its reply and call; default 60)",
    )
    p.add_argument("--sweep-status", type=int, nargs="*", default=[64, 256], help="S values of the sweep")
    p.add_argument("--sweep-between", type=int, nargs="*", default=[16, 128], help="R values of the sweep")
    p.add_argument("--sweep-steps", type=int, nargs="*", default=[4, 10], help="N values of the sweep")
    p.set_defaults(func=main)


def replay_status(
    engine: Engine, traj: Trajectory, layouts: list[str], repeats: int, desc: str
) -> list[TurnRecord]:
    convs = [
        Conversation(
            name, lambda t, _r, name=name: status_request(name, traj, t), lambda t: call_message(traj, t)
        )
        for name in layouts
    ]
    return Replayer(engine, repeats, cold=False).run(convs, len(traj.calls), desc=desc)


def sweep_point(engine: Engine, status: int, between: int, steps: int, repeats: int) -> dict[str, Any]:
    """Measured sum-of-TTFT difference (append - replace) against the cost model with measured c, alpha."""
    traj = build_trajectory(engine.tokenizer, steps, status, between)
    recs = replay_status(
        engine, traj, ["status-replace", "status-append"], repeats, f"S={status} R={between} N={steps}"
    )
    total = {
        name: sum(r.ttft_s for r in recs if r.conversation == name)
        for name in ("status-replace", "status-append")
    }
    s = len(engine.tokenizer(render_status(traj, steps // 2), add_special_tokens=False).input_ids)
    last = status_request("status-replace", traj, 0)
    r = len(reply_tokens(engine, last, call_message(traj, 0)))
    new = s + r + len(engine.tokenizer(traj.results[0], add_special_tokens=False).input_ids)
    append = [x for x in recs if x.conversation == "status-append"]
    context = max(engine.blocks.block_size, int(sum(x.cached_tokens for x in append) / len(append)))
    c, alpha = measure_token_costs(engine, context, new, repeats)
    predicted = c * (append_extra_tokens(s, r, steps, alpha) - replace_extra_tokens(s, r, steps, alpha))
    measured = total["status-append"] - total["status-replace"]
    return {
        "status_tokens": s,
        "between_tokens": r,
        "updates": steps,
        "alpha": alpha,
        "c_ms_per_token": 1000 * c,
        "measured_ms": 1000 * measured,
        "predicted_ms": 1000 * predicted,
        "break_even_between": break_even_between(s, steps, alpha),
        "append_wins_measured": measured < 0,
        "append_wins_predicted": predicted < 0,
    }


def main(args: argparse.Namespace) -> int:
    engine = open_engine(args)
    traj = build_trajectory(engine.tokenizer, args.steps, args.status_tokens, args.between_tokens)
    records = replay_status(engine, traj, list(STATUS_LAYOUTS), args.repeats, "statusbar")
    summary = summarize(records, "status-replace")
    sweep = [
        sweep_point(engine, s, r, n, args.repeats)
        for s, r, n in itertools.product(args.sweep_status, args.sweep_between, args.sweep_steps)
    ]

    out = run_dir(args, "statusbar", engine)
    title = f"{engine.info['model']} ({engine.info['dtype']}, {engine.info['device']})"
    plot_cumulative(records, out / "cumulative.png", f"Status-bar layouts: {title}")
    plot_cached_share(records, out / "cached_share.png", f"Cached share per step: {title}")
    plot_token_strip(
        records, args.steps, out / "token_strip.png", f"Where reuse ends at step {args.steps}: {title}"
    )
    if sweep:
        plot_sweep(sweep, out / "sweep.png", f"Replace vs append, measured vs model: {title}")
        write_csv(out / "sweep.csv", sweep)
    agree = sum(r["append_wins_measured"] == r["append_wins_predicted"] for r in sweep)
    notes = [
        f"Main run: N={args.steps} updates, S≈{args.status_tokens} status tokens, R≈{args.between_tokens} "
        "agent tokens between updates; scripted tool calls, so every layout sees the same trajectory.",
        "",
        "Cost model: replace ≈ (N-1)(1-α)R, append ≈ αSN(N-1)/2 token-equivalents; α and the cost of a "
        "computed token c are measured per sweep point with the same new-token count and cached context.",
        f"The model picks the cheaper layout correctly in {agree} of {len(sweep)} sweep points.",
        "",
        table(sweep, SWEEP_COLUMNS) if sweep else "",
    ]
    plots = [
        ("cumulative.png", "cumulative computed tokens and TTFT"),
        ("cached_share.png", "cached share"),
        ("token_strip.png", "token strip"),
    ] + ([("sweep.png", "measured vs predicted")] if sweep else [])
    write_results(
        out,
        "Status-bar layouts",
        environment(engine, "statusbar", args),
        records,
        summary,
        notes,
        plots,
        {"sweep": sweep},
    )
    print(table(summary, SUMMARY_COLUMNS))
    if sweep:
        print(table(sweep, SWEEP_COLUMNS))
    print(f"results: {out}")
    return 0
