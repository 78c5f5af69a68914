"""`python -m engine.bench statusbar`: the run (its description and flags: engine/bench/flags/statusbar.py)."""

from __future__ import annotations

import argparse
import itertools
from typing import Any

from engine.bench.args import open_engine
from engine.bench.harness.replayer import Conversation, Replayer, TurnRecord, finished_turns
from engine.bench.reporting.replay_plots import (
    plot_cached_share,
    plot_cumulative,
    plot_sweep,
    plot_token_strip,
)
from engine.bench.reporting.replay_report import SUMMARY_COLUMNS, summarize_turns, table, write_results
from engine.bench.reporting.results import environment, write_csv
from engine.bench.reporting.run_folder import interrupted, run_dir, written
from engine.bench.reporting.stats import MIN_PASSES, per_pass, spread, verdict
from engine.bench.workloads.agent_status import (
    STATUS_LAYOUTS,
    Trajectory,
    call_message,
    sized_trajectory,
    sizes,
    status_request,
)
from engine.bench.workloads.costs import (
    append_extra_tokens,
    break_even_between,
    measure_token_costs,
    replace_extra_tokens,
)
from engine.runtime.engine import Engine

SWEEP_COLUMNS = [
    "status_tokens_asked",
    "status_tokens",
    "between_tokens_asked",
    "between_tokens",
    "updates",
    "passes",
    "alpha",
    "c_ms_per_token",
    "measured_ms",
    "predicted_ms",
    "break_even_between",
    "append_wins_measured",
    "append_wins_predicted",
    "measured_verdict",
    "measured_p",
    "contended_passes",
]


def replay_status(replayer: Replayer, traj: Trajectory, layouts: list[str], desc: str) -> list[TurnRecord]:
    """Every status layout over the trajectory's calls, interleaved in one replay (no cold baselines)."""
    convs = [
        Conversation(
            name, lambda t, _r, name=name: status_request(name, traj, t), lambda t: call_message(traj, t)
        )
        for name in layouts
    ]
    return replayer.run(convs, len(traj.calls), desc=desc)


def sweep_point(engine: Engine, traj: Trajectory, asked: tuple[int, int], repeats: int) -> dict[str, Any]:
    """Measured sum-of-TTFT difference (append - replace), per pass, with the sign test of the per-pass
    differences against 0, against the cost model with measured c and alpha (min-max of the prediction over
    alpha's repeats). `asked`: the S and R the sweep asked for."""
    steps = len(traj.calls)
    s, r = sizes(engine, traj)
    replayer = Replayer(engine, repeats, cold=False)
    layouts = ["status-replace", "status-append"]
    recs = replay_status(replayer, traj, layouts, f"S={s} R={r} N={steps}")
    total = {  # summed TTFT of each pass
        name: per_pass([r.ttft_passes_s for r in recs if r.conversation == name], sum) for name in layouts
    }
    new = s + r + len(engine.tokenizer(traj.results[0], add_special_tokens=False).input_ids)
    append = [x for x in recs if x.conversation == "status-append"]
    context = max(engine.blocks.block_size, int(sum(x.cached_tokens for x in append) / len(append)))
    costs = measure_token_costs(engine, context, new, repeats)

    def predict(alpha: float) -> float:
        return (
            1000
            * costs.c
            * (append_extra_tokens(s, r, steps, alpha) - replace_extra_tokens(s, r, steps, alpha))
        )

    differences = [
        1000 * (a - b) for a, b in zip(total["status-append"], total["status-replace"], strict=False)
    ]
    measured, (word, p) = spread(differences), verdict(differences, center=0.0)
    predicted = [predict(a) for a in costs.alphas]
    return {
        "status_tokens_asked": asked[0],
        "between_tokens_asked": asked[1],
        "status_tokens": s,
        "between_tokens": r,
        "updates": steps,
        "passes": measured["n"],
        "alpha": costs.alpha,
        "alpha_min": min(costs.alphas),
        "alpha_max": max(costs.alphas),
        "c_ms_per_token": 1000 * costs.c,
        "measured_ms": measured["median"],
        "measured_ms_min": measured["min"],
        "measured_ms_max": measured["max"],
        "predicted_ms": predict(costs.alpha),
        "predicted_ms_min": min(predicted),
        "predicted_ms_max": max(predicted),
        "break_even_between": break_even_between(s, steps, costs.alpha),
        "append_wins_measured": measured["median"] < 0,
        "append_wins_predicted": predict(costs.alpha) < 0,
        "measured_verdict": {"lower": "append cheaper", "higher": "replace cheaper"}.get(word, word),
        "measured_p": p,
        "contended_passes": sum(x.contended for x in replayer.passes),
    }


def main(args: argparse.Namespace) -> int:
    engine = open_engine(args)
    traj = sized_trajectory(engine, args.steps, args.status_tokens, args.between_tokens)
    points = list(itertools.product(args.sweep_status, args.sweep_between, args.sweep_steps))
    trajectories = [sized_trajectory(engine, n, s, r) for s, r, n in points]  # a size refused before any run
    replayer = Replayer(engine, args.repeats, cold=False)
    records, partial = finished_turns(
        lambda: replay_status(replayer, traj, list(STATUS_LAYOUTS), "statusbar")
    )
    if partial and not records:
        return interrupted(0, "turns", None)
    summary = summarize_turns(records, "status-replace")
    sweep: list[dict[str, Any]] = []
    try:
        for (s, r, _n), point in zip(points if not partial else [], trajectories, strict=False):
            sweep.append(sweep_point(engine, point, (s, r), args.repeats))
    except KeyboardInterrupt:  # keep the sweep points that finished
        partial = True

    out = run_dir(args, "statusbar", engine)
    title = f"{engine.info['model']} ({engine.info['dtype']}, {engine.info['device']})"
    plot_cumulative(records, out / "cumulative.png", f"Status-bar layouts: {title}")
    plot_cached_share(records, out / "cached_share.png", f"Cached share per step: {title}")
    last = max(r.turn for r in records)
    plot_token_strip(records, last, out / "token_strip.png", f"Where reuse ends at step {last}: {title}")
    if sweep:
        plot_sweep(sweep, out / "sweep.png", f"Replace vs append, measured vs model\n{title}")
        write_csv(out / "sweep.csv", sweep)
    agree = sum(r["append_wins_measured"] == r["append_wins_predicted"] for r in sweep)
    told = sum(r["measured_verdict"] in ("append cheaper", "replace cheaper") for r in sweep)
    few = sum(r["measured_verdict"].startswith("too few") for r in sweep)
    s_main, r_main = sizes(engine, traj)
    notes = [
        f"Main run: N={args.steps} updates, S={s_main} status tokens (asked {args.status_tokens}), "
        f"R={r_main} agent tokens between updates (asked {args.between_tokens}); scripted tool calls, so "
        "every layout sees the same trajectory. S and R as the cost model takes them: the status at the "
        "middle step; the agent's reply (its words and tool call) as the model emits it.",
        "",
        "Cost model: replace ≈ (N-1)(1-α)R, append ≈ αSN(N-1)/2 token-equivalents; the marginal cost of a "
        "computed token c (the slope of cold TTFT between n and 2n new tokens, so a forward's fixed cost cancels) "
        "and α (the warm path's extra TTFT per cached token over the same n new tokens alone, relative to c) are "
        "measured per sweep point with its new-token count and cached context, the arms back to back in an "
        "order that alternates per repeat.",
        (
            f"The model picks the cheaper layout correctly in {agree} of {len(sweep)} sweep points"
            + (f" ({len(points)} asked)" if len(sweep) < len(points) else "")
            + f"; a sign test of the per-pass differences against 0 (p ≤ 0.05, `measured_p`) tells which "
            f"layout is cheaper in {told} of them"
            + (f", too few passes to tell in {few} (a verdict needs {MIN_PASSES})" if few else "")
            + ", the others are within noise. `contended_passes`: passes of that point run on a busy machine."
            if points
            else "No sweep: a sweep flag was given no values."
        ),
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
        environment(engine, "statusbar", args, partial),
        records,
        summary,
        notes,
        plots,
        {"sweep": sweep},
        replayer.passes,
    )
    print(table(summary, SUMMARY_COLUMNS))
    if sweep:
        print(table(sweep, SWEEP_COLUMNS))
    if partial:
        return interrupted(len(records), f"turns and {len(sweep)} of {len(points)} sweep points", out)
    return written(out)
