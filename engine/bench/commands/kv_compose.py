"""`python -m engine.bench kv-compose`: the run (its description and flags: engine/bench/flags/kv_compose.py)."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

from tqdm import tqdm

from engine.approx.assembly import Compute
from engine.approx.plans import Part, plan_prefix, plan_splice
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
from engine.bench.reporting.approx_plots import plot_layer_cosine, plot_ttft_vs_length
from engine.bench.reporting.replay_report import PARTIAL_NOTE, table
from engine.bench.reporting.results import environment, provenance, write_csv, write_json
from engine.bench.reporting.run_folder import interrupted, run_dir
from engine.bench.workloads.skills import QUESTIONS, SKILLS, layouts, note, skill_text, template_parts


def main(args: argparse.Namespace) -> int:
    engine = open_engine(args, exact_because=EXACT_ARMS)
    env = environment(engine, "kv-compose", args)  # now: the commit whose code runs
    tok = lambda text: engine.tokenizer(text, add_special_tokens=False).input_ids  # noqa: E731
    pre = tok(
        template_parts(engine.tokenizer, QUESTIONS[0])[0]
    )  # the preamble does not depend on the question
    tails = {q: tok(template_parts(engine.tokenizer, q)[1]) for q in QUESTIONS}
    blocks = {name: tok(skill_text(name, args.repeat)) for name in SKILLS}
    snaps = {
        name: snapshot(engine, pre + ids) for name, ids in tqdm(blocks.items(), desc="precompute skills")
    }
    spliced = f"splice+{round(100 * args.recompute)}%"
    variants = ["recompute", "exact-prefix", "splice", spliced]
    rows: list[dict[str, Any]] = []
    loads: list[PassLoad] = []  # per prompt
    try:
        for i, lay in enumerate(tqdm(layouts(args.prompts, args.seed), desc="kv-compose", unit="prompt")):
            parts: list[Part] = [(snaps[lay.skills[0]], 0, len(pre))]
            for k, (name, with_note) in enumerate(zip(lay.skills, lay.notes, strict=True)):
                parts += ([tok(note(k))] if with_note else []) + [
                    (snaps[name], len(pre), len(pre) + len(blocks[name]))
                ]
            ids, plan = plan_splice([*parts, tails[lay.question]])
            plans = {
                "recompute": (ids, [Compute(len(ids))]),
                "exact-prefix": (ids, plan_prefix(snaps[lay.skills[0]], ids)),
                "splice": (ids, plan),
                spliced: (ids, plan_splice([*parts, tails[lay.question]], args.recompute)[1]),
            }
            runs, load = run_arms(engine, plans, i, args.answer_tokens)
            loads.append(load)
            rows += [
                {"prompt": i, "skills": "+".join(lay.skills), "blocks": len(lay.skills), "variant": v}
                | score(runs["recompute"], runs[v], load)
                for v in variants
            ]
    except KeyboardInterrupt:  # keep the prompts that finished
        env["partial"] = True
        if not rows:
            return interrupted(0, "prompts", None)
    summary = summarize_variants(rows, variants, "recompute")

    out = run_dir(args, "kv-compose", engine)
    write_json(
        out / "kv_compose.json",
        {"environment": env, "summary": summary, "loads": [asdict(x) for x in loads], "prompts": rows},
    )
    write_csv(out / "prompts.csv", flat(rows))
    write_csv(out / "summary.csv", flat(summary))
    title = f"{engine.info['model']} ({engine.info['dtype']}, {engine.info['device']})"
    plot_ttft_vs_length(rows, variants, out / "ttft_vs_length.png", f"kv-compose TTFT: {title}")
    plot_layer_cosine(
        summary, out / "layer_cosine.png", f"kv-compose, last token's hidden state vs exact: {title}"
    )
    text = table(shown(summary), SUMMARY_COLUMNS)
    report = [
        f"# kv-compose: {title}",
        "",
        *provenance(env),
        f"- {len(rows) // len(variants)} of {args.prompts} prompts of 1-4 skill blocks "
        f"({args.repeat} x 4 rules each)",
        f"- {SPREAD_NOTE}",
        f"- {contention_note(loads, 'prompts')}",
        "",
        *([PARTIAL_NOTE, ""] if env["partial"] else []),
        text,
        "",
        LAYER_NOTE,
        "",
        "![TTFT vs length](ttft_vs_length.png)",
        "",
        "![per-layer cosine](layer_cosine.png)",
    ]
    code = finish(engine, out, report, text)
    return interrupted(len(rows) // len(variants), "prompts", out) if env["partial"] else code
