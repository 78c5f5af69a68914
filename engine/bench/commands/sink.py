"""`python -m engine.bench sink`: the run (its description and flags: engine/bench/flags/sink.py)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from engine.bench.args import open_engine
from engine.bench.flags.sink import CHECK_MAX_TOKENS
from engine.bench.reporting.replay_report import PARTIAL_NOTE, markdown_text, table
from engine.bench.reporting.results import environment, provenance, write_csv, write_json
from engine.bench.reporting.run_folder import interrupted, run_dir, written
from engine.bench.workloads.sink_prompts import load_prompt, variants
from engine.errors import PromptError
from engine.inspect.attention import token_labels
from engine.inspect.sinks import lengths, sink_rows, summary, transformers_rows
from engine.runtime.engine import Engine
from engine.viz.charts import layer_head_matrices, line_chart


def measure(
    engine: Engine, name: str, variant: str, ids: list[int], args: argparse.Namespace, reference: Any | None
) -> dict[str, Any]:
    first, first_k, keys = sink_rows(engine.model, ids, args.min_row, args.first_k)
    labels = token_labels(engine.tokenizer, ids)
    record = {
        "prompt": name,
        "variant": variant,
        "tokens": len(ids),
        "first_token": labels[0],
        "rows": [args.min_row, len(ids)],
        "token0": summary(first.mean(-1), args.epsilon),
        "first_k": summary(first_k.mean(-1), args.epsilon),
        "lengths": lengths(first, args.min_row, len(ids), args.epsilon),
        "strongest_key": [
            {"position": int(i), "token": labels[i], "score": layer[i].item()}
            for layer in keys
            for i in [int(layer.argmax())]
        ],
    }
    if reference is not None and len(ids) <= CHECK_MAX_TOKENS:
        ref_first, ref_first_k = transformers_rows(reference, ids, args.min_row, args.first_k)
        record["transformers_max_abs_diff"] = max(
            (first - ref_first).abs().max().item(), (first_k - ref_first_k).abs().max().item()
        )
    return record


def main(args: argparse.Namespace) -> int:
    if args.min_row < 1 or args.first_k < 1:
        raise PromptError(
            f"--min-row and --first-k must be at least 1, got {args.min_row} and {args.first_k}"
        )
    engine = open_engine(args, timed=False)
    prompts = {spec: load_prompt(engine, spec) for spec in args.prompts}
    reference = None
    if args.check_transformers:
        if engine.source.weights_dir is None:
            raise PromptError(
                "--check-transformers needs weights transformers can load; this model is synthetic"
            )
        from transformers import AutoModelForCausalLM

        reference = AutoModelForCausalLM.from_pretrained(
            str(engine.source.weights_dir), dtype=torch.float32, attn_implementation="eager"
        ).eval()
    jobs = [
        (name, variant, v) for name, ids in prompts.items() for variant, v in variants(engine, ids).items()
    ]
    records: list[dict[str, Any]] = []
    try:
        for job in tqdm(jobs, desc="sink", unit="prompt"):
            records.append(measure(engine, *job, args, reference))
        partial = False
    except KeyboardInterrupt:  # keep the prompts that finished
        partial = True
        if not records:
            return interrupted(0, "prompts", None)
    out = run_dir(args, "sink", engine)
    env = environment(engine, "sink", args, partial)
    write_json(out / "sink.json", {"environment": env, "records": records})
    write_csv(
        out / "sink.csv",
        [
            {
                "prompt": r["prompt"],
                "variant": r["variant"],
                "layer": layer,
                "head": head,
                "token0": r["token0"]["layer_head"][layer][head],
                f"first_{args.first_k}": r["first_k"]["layer_head"][layer][head],
            }
            for r in records
            for layer in range(engine.config.num_layers)
            for head in range(engine.config.num_heads)
        ],
    )
    text = report(records, args, engine.source.model_id)
    head = [*provenance(env), "", *([PARTIAL_NOTE, ""] if partial else [])]
    (out / "report.md").write_text("\n".join([*head, text]) + "\n")
    print(text)
    plot(records, args, engine, out)
    if partial:
        return interrupted(len(records), "prompts", out)
    return written(out)


def report(records: list[dict[str, Any]], args: argparse.Namespace, model: str) -> str:
    """Markdown: one summary row per prompt and variant, where other keys outdraw token 0, and lengths."""
    rows = [
        {
            "prompt": r["prompt"],
            "variant": r["variant"],
            "tokens": r["tokens"],
            "token 0": r["first_token"],
            "mean": r["token0"]["mean"],
            "median": r["token0"]["median"],
            "max": r["token0"]["max"],
            "max layer": r["token0"]["max_layer"],
            f"> {args.epsilon}": r["token0"]["heads_above_eps"],
            "> 0.5": r["token0"]["heads_above_0.5"],
            f"first {args.first_k} mean": r["first_k"]["mean"],
            "near-zero layers": ",".join(map(str, r["token0"]["near_zero_layers"])),
            "vs transformers": f"{r['transformers_max_abs_diff']:.1e}"
            if "transformers_max_abs_diff" in r
            else "-",
        }
        for r in records
    ]
    other = [
        f"- {r['prompt']}, {r['variant']}: "
        + "; ".join(
            f"layer {i}: {markdown_text(k['token'])} at {k['position']} ({k['score']:.2f})"
            for i, k in enumerate(r["strongest_key"])
            if k["position"] != 0
        )
        for r in records
    ]
    longest = max(records, key=lambda r: r["tokens"])
    by_length = [
        {
            "length": x["length"],
            "mean share on token 0": x["mean"],
            f"heads > {args.epsilon}": x["heads_above_eps"],
        }
        for x in longest["lengths"]
    ]
    return "\n\n".join(
        [
            f"# Attention sinks: {model}",
            f"Share of attention on token 0, per layer (mean over heads and rows {args.min_row}..), "
            f"summarised over layers; `> {args.epsilon}` and `> 0.5`: fraction of layer-head pairs above; "
            "`vs transformers`: max "
            f"|difference| of any per-row share from transformers' eager attention.",
            table(rows, list(rows[0])),
            "Layers whose strongest key (sink score over the rows that see it) is not token 0:",
            "\n".join(other),
            f"By prompt length (prefixes of '{longest['prompt']}', {longest['variant']}):",
            table(by_length, list(by_length[0])),
        ]
    )


def plot(records: list[dict[str, Any]], args: argparse.Namespace, engine: Engine, out: Path) -> None:
    name, layers = engine.source.model_id, list(range(engine.config.num_layers))
    line_chart(
        {f"{r['prompt']}, {r['variant']}": (layers, r["token0"]["per_layer"]) for r in records},
        out / "sink_layers.png",
        title=f"{name}: share of attention on token 0 (rows ≥ {args.min_row})",
        xlabel="layer",
        ylabel="mean share over heads",
        hline=args.epsilon,
    )
    line_chart(
        {
            f"{r['prompt']}, {r['variant']}": (
                [x["length"] for x in r["lengths"]],
                [x["mean"] for x in r["lengths"]],
            )
            for r in records
        },
        out / "sink_lengths.png",
        title=f"{name}: share on token 0 by prompt length",
        xlabel="prompt length (tokens)",
        ylabel="mean share over layers, heads, rows",
        logx=True,
    )
    longest = max(records, key=lambda r: r["tokens"])["prompt"]
    layer_head_matrices(
        {r["variant"]: torch.tensor(r["token0"]["layer_head"]) for r in records if r["prompt"] == longest},
        out / "sink_heads.png",
        title=f"{name}, prompt '{longest}': share on token 0",
        label="mean share over rows",
    )
