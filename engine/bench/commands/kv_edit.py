"""`python -m engine.bench kv-edit`: the run (its description and flags: engine/bench/flags/kv_edit.py)."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

from tqdm import tqdm

from engine.approx.assembly import Compute
from engine.approx.plans import plan_edit, plan_prefix
from engine.approx.snapshot import snapshot
from engine.bench.args import EXACT_ARMS, open_engine
from engine.bench.harness.approx_runs import (
    LAYER_NOTE,
    SPREAD_NOTE,
    SUMMARY_COLUMNS,
    finish,
    flat,
    run_arms,
    score,
    shown,
    summarize_variants,
)
from engine.bench.harness.contention import PassLoad, contention_note
from engine.bench.reporting.approx_plots import plot_agreement, plot_layer_cosine
from engine.bench.reporting.replay_report import PARTIAL_NOTE, table
from engine.bench.reporting.results import environment, provenance, write_csv, write_json
from engine.bench.reporting.run_folder import interrupted, run_dir
from engine.bench.workloads.field_edit import context, decision, messages, pairs
from engine.bench.workloads.scenario import build_scenario
from engine.bench.workloads.time_line import TIE_IN_LAYOUTS, consecutive
from engine.runtime.engine import Engine

VARIANTS = ["exact", "exact-prefix", "stale", "edit", "edit+W", "erratum"]
LAYOUT_VARIANTS = ["stable-first", "timestamp-first", "timestamp-first+edit"]


def run_pair(
    engine: Engine,
    pair: Any,
    downstream: str,
    cot: bool,
    window: int,
    new_tokens: int,
    turn: int,
    loads: list[PassLoad],
) -> list[dict[str, Any]]:
    """Every variant of one (old, new) pair, in an order rotated by `turn` (interleaved timings); the
    machine's load while they ran is appended to `loads`."""
    f = pair.field
    old_ids = engine.render(messages(f, pair.old, downstream, cot))
    new_ids = engine.render(messages(f, pair.new, downstream, cot))
    err_ids = engine.render(messages(f, pair.old, downstream, cot, erratum=pair.new))
    old = snapshot(engine, old_ids)  # the previous request's K/V, as a cache holds them (exact, untimed)
    plans = {
        "exact": (new_ids, [Compute(len(new_ids))]),
        "exact-prefix": (new_ids, plan_prefix(old, new_ids)),
        "stale": (old_ids, plan_edit(old, old_ids)),
        "edit": (new_ids, plan_edit(old, new_ids)),
        "edit+W": (new_ids, plan_edit(old, new_ids, window)),
        "erratum": (err_ids, plan_prefix(old, err_ids)),
    }
    runs, load = run_arms(engine, plans, turn, new_tokens)
    loads.append(load)
    want = decision(runs["exact"].text, f.options)
    was = decision(runs["stale"].text, f.options)  # the stale run is the old prompt answered exactly
    return [
        {
            "pair": turn,
            "field": f.name,
            "old": pair.old,
            "new": pair.new,
            "cot": cot,
            "variant": v,
            "decision": decision(runs[v].text, f.options),
            "exact_decision": want,
            "old_decision": was,
            "agree": decision(runs[v].text, f.options) == want,
        }
        | score(runs["exact"], runs[v], load)
        for v in VARIANTS
    ]


def agreement(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Decision agreement per variant and CoT setting: over all pairs, and over the pairs whose exact
    decision changed with the field (where acting on the old value shows)."""
    out = []
    for cot in (False, True):
        for v in VARIANTS:
            rs = [r for r in rows if r["variant"] == v and r["cot"] == cot]
            if not rs:  # a Ctrl-C before any run of this setting
                continue
            flipped = [r for r in rs if r["exact_decision"] != r["old_decision"]]
            out.append(
                {
                    "variant": v,
                    "cot": cot,
                    "pairs": len(rs),
                    "agree": sum(r["agree"] for r in rs) / len(rs),
                    "flipped_pairs": len(flipped),
                    "agree_flipped": sum(r["agree"] for r in flipped) / len(flipped) if flipped else None,
                    "no_decision": sum(r["decision"] == "-" for r in rs) / len(rs),
                }
            )
    return out


def layout_rescue(engine: Engine, args: argparse.Namespace, rows: list[dict[str, Any]]) -> None:
    """Turns 2+ of the small `bench layout` scenario: stable-first and timestamp-first with exact prefix reuse
    of the previous request, and timestamp-first with the time line edited in place (the rest stale). Each is
    scored against the exact recompute of its own prompt (ttft_ratio: to that cold run). Rows are appended to
    `rows` turn by turn (a Ctrl-C keeps the turns that finished)."""
    sc = build_scenario(engine.tokenizer, "small", args.seed, args.turns)
    for t in tqdm(range(1, len(sc.turns)), desc="kv-edit layout", unit="turn"):
        (stable_before, stable), (ts_before, ts) = (consecutive(engine, sc, lay, t) for lay in TIE_IN_LAYOUTS)
        s_prev, t_prev = snapshot(engine, stable_before), snapshot(engine, ts_before)
        plans = {
            "stable-first": (stable, plan_prefix(s_prev, stable)),
            "timestamp-first": (ts, plan_prefix(t_prev, ts)),
            "timestamp-first+edit": (ts, plan_edit(t_prev, ts)),
            "stable-first cold": (stable, [Compute(len(stable))]),
            "timestamp-first cold": (ts, [Compute(len(ts))]),
        }
        runs, load = run_arms(engine, plans, t, args.answer_tokens)
        rows += [
            {"turn": t + 1, "variant": v} | score(runs[v.split("+")[0] + " cold"], runs[v], load)
            for v in LAYOUT_VARIANTS
        ]


def main(args: argparse.Namespace) -> int:
    engine = open_engine(args, exact_because=EXACT_ARMS)
    env = environment(engine, "kv-edit", args)  # now: the commit whose code runs
    downstream = context(args.policies, args.seed)
    todo = [(i, p, cot) for i, p in enumerate(pairs(args.pairs, args.seed)) for cot in (False, True)]
    rows: list[dict[str, Any]] = []
    layout_rows: list[dict[str, Any]] = []
    loads: list[PassLoad] = []  # per (pair, step-by-step) run
    try:
        for i, pair, cot in tqdm(todo, desc="kv-edit", unit="pair"):
            new_tokens = args.cot_tokens if cot else args.answer_tokens
            rows += run_pair(engine, pair, downstream, cot, args.window, new_tokens, i, loads)
        layout_rescue(engine, args, layout_rows)
    except KeyboardInterrupt:  # keep the pairs (and layout turns) that finished
        env["partial"] = True
        if not rows:
            return interrupted(0, "pairs", None)
    agree = agreement(rows)
    summary = [
        s | {"cot": cot}
        for cot in (False, True)
        for s in summarize_variants([r for r in rows if r["cot"] == cot], VARIANTS, "exact", "pairs")
    ]
    layout_summary = summarize_variants(layout_rows, LAYOUT_VARIANTS, unit="turns")

    out = run_dir(args, "kv-edit", engine)
    write_json(
        out / "kv_edit.json",
        {
            "environment": env,
            "agreement": agree,
            "summary": summary,
            "layout_summary": layout_summary,
            "loads": [asdict(x) for x in loads],
            "pairs": rows,
            "layout": layout_rows,
        },
    )
    write_csv(out / "pairs.csv", flat(rows))
    write_csv(out / "summary.csv", flat(summary))
    write_csv(out / "layout.csv", flat(layout_rows))
    title = f"{engine.info['model']} ({engine.info['dtype']}, {engine.info['device']})"
    plot_agreement(agree, out / "decision_agreement.png", f"kv-edit decision agreement: {title}")
    plot_layer_cosine(
        summary, out / "layer_cosine.png", f"kv-edit, last token's hidden state vs exact: {title}"
    )
    tables = [
        table(agree, ["variant", "cot", "pairs", "agree", "flipped_pairs", "agree_flipped", "no_decision"]),
        table(shown(summary), ["cot", *SUMMARY_COLUMNS]),
        table(shown(layout_summary), SUMMARY_COLUMNS),
    ]
    report = [
        f"# kv-edit: {title}",
        "",
        *provenance(env),
        f"- {args.pairs} field pairs, each answered directly and step by step "
        f"({len(rows) // len(VARIANTS)} runs finished), window W={args.window}, "
        f"{args.policies} policy lines downstream",
        f"- {SPREAD_NOTE}",
        f"- {contention_note(loads, 'pair runs')}",
        "",
        *([PARTIAL_NOTE, ""] if env["partial"] else []),
        "## Decision agreement",
        "",
        tables[0],
        "",
        "## Fidelity and TTFT (against the exact recompute)",
        "",
        LAYER_NOTE,
        "",
        tables[1],
        "",
        "Erratum and stale answer a different prompt than the exact run: their fidelity is "
        "measured against the exact new prompt's answer.",
        "",
        "## Layout tie-in: timestamp-first rescued by an in-place edit of the time line",
        "",
        tables[2],
        "",
        "![decision agreement](decision_agreement.png)",
        "",
        "![per-layer cosine](layer_cosine.png)",
    ]
    code = finish(engine, out, report, "\n\n".join(tables))
    return interrupted(len(rows) // len(VARIANTS), "pair runs", out) if env["partial"] else code
