"""What `bench needle` writes: per (length, position) cells, the questions, report.md and the plots.

A cell's `accuracy` is the share of its questions answered right (n questions), `wrong_number_share` the
share answered with another number, `not_number_share` the rest. Attention shares are those of the
answering row (see engine/bench/commands/needle.py) on the asked record's tokens: per layer the mean over
heads, then the mean over the cell's questions (and over its right or its wrong answers apart);
`uniform_share` is what attention spread evenly over the row's keys would give the record.
"""

from __future__ import annotations

import argparse
import statistics
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from engine.bench.reporting.replay_report import PARTIAL_NOTE, markdown_text, table
from engine.bench.reporting.results import environment, provenance, write_csv, write_json
from engine.bench.reporting.stats import rank_sum
from engine.bench.workloads.delivery_log import POSITIONS
from engine.runtime.engine import Engine
from engine.viz.charts import line_chart, matrix_grid

SOURCES = ("another fact", "a filler", "its own id or time", "no record")


def _mean_rows(rows: Sequence[Sequence[float]]) -> list[float] | None:
    return torch.tensor(rows).mean(0).tolist() if rows else None


def summarize(questions: list[dict[str, Any]], layers: int, top: int) -> list[dict[str, Any]]:
    """One cell per (length, position), in the order the questions ran."""
    keys = list(dict.fromkeys((q["length"], q["position"]) for q in questions))
    cells = []
    for length, position in keys:
        qs = [q for q in questions if (q["length"], q["position"]) == (length, position)]
        n = len(qs)
        verdicts = Counter(q["verdict"] for q in qs)
        heads = torch.tensor([q["share_layer_head"] for q in qs]).mean(0)  # [layers, heads]
        best = heads.flatten().topk(min(top, heads.numel()))
        cells.append(
            {
                "length": length,
                "position": position,
                "log_tokens": qs[0]["log_tokens"],
                "fact_start_token": min(q["fact_tokens"][0] for q in qs),
                "n": n,
                "right": verdicts["right"],
                "accuracy": verdicts["right"] / n,
                "wrong_number_share": verdicts["wrong number"] / n,
                "not_number_share": verdicts["not a number"] / n,
                "wrong_sources": {s: sum(q["source"] == s for q in qs) for s in SOURCES},
                "uniform_share": statistics.mean(q["uniform_share"] for q in qs),
                "attention_share_by_layer": _mean_rows([q["share_by_layer"] for q in qs]),
                "attention_share_right_by_layer": _mean_rows(
                    [q["share_by_layer"] for q in qs if q["verdict"] == "right"]
                ),
                "attention_share_wrong_by_layer": _mean_rows(
                    [q["share_by_layer"] for q in qs if q["verdict"] != "right"]
                ),
                "other_facts_share_by_layer": _mean_rows([q["other_facts_share_by_layer"] for q in qs]),
                "top_heads": [
                    {"layer": int(i) // heads.shape[1], "head": int(i) % heads.shape[1], "share": float(v)}
                    for v, i in zip(best.values, best.indices, strict=True)
                ],
            }
        )
    return cells


def _average(values: list[float] | None) -> float | None:
    return statistics.mean(values) if values else None


def _peak(by_layer: list[float] | None) -> str:
    if not by_layer:
        return "-"
    layer = max(range(len(by_layer)), key=by_layer.__getitem__)
    return f"{by_layer[layer]:.3f} (layer {layer})"


def report(cells: list[dict[str, Any]], questions: list[dict[str, Any]], model: str) -> str:
    lengths = list(dict.fromkeys(c["length"] for c in cells))
    positions = [p for p in POSITIONS if any(c["position"] == p for c in cells)]
    by = {(c["length"], c["position"]): c for c in cells}
    accuracy = [
        {"position": p}
        | {
            str(n): f"{by[n, p]['accuracy']:.3f} (n={by[n, p]['n']})" if (n, p) in by else "-"
            for n in lengths
        }
        for p in positions
    ]
    overall = {"position": "all"}
    for n in lengths:
        qs = [q for q in questions if q["length"] == n]
        overall[str(n)] = f"{sum(q['verdict'] == 'right' for q in qs) / len(qs):.3f} (n={len(qs)})"
    accuracy.append(overall)
    misses = [
        {"length": n, "questions": len(qs), "right": sum(q["verdict"] == "right" for q in qs)}
        | {f"wrong: {s}": sum(q["source"] == s for q in qs) for s in SOURCES}
        | {"not a number": sum(q["verdict"] == "not a number" for q in qs)}
        for n in lengths
        for qs in [[q for q in questions if q["length"] == n]]
    ]
    attention = [
        {
            "length": c["length"],
            "position": c["position"],
            "fact starts at token": c["fact_start_token"],
            "mean over layers": statistics.mean(c["attention_share_by_layer"]),
            "peak layer": _peak(c["attention_share_by_layer"]),
            "right: mean": _average(c["attention_share_right_by_layer"]),
            "wrong: mean": _average(c["attention_share_wrong_by_layer"]),
            "uniform": c["uniform_share"],
            "other facts": statistics.mean(c["other_facts_share_by_layer"]),
            "top head": "L{layer}H{head} {share:.3f}".format(**c["top_heads"][0]),
        }
        for c in cells
    ]
    right = [statistics.mean(q["share_by_layer"]) for q in questions if q["verdict"] == "right"]
    wrong = [statistics.mean(q["share_by_layer"]) for q in questions if q["verdict"] != "right"]
    word, p = rank_sum(right, wrong)
    compare = "; ".join(
        f"{name}: median {statistics.median(v):.4f} [{min(v):.4f}–{max(v):.4f}], n={len(v)}"
        for name, v in (("right", right), ("wrong", wrong))
        if v
    )
    verdict = f"right against wrong: {word}" + (f" (rank-sum p = {p:.3g})" if p is not None else "")
    examples = [
        f"- {q['length']} tokens, {q['position']}, order {q['order']} ({q['tubs']} tubs): "
        f"{markdown_text(q['answer'])!r} → {q['verdict']}" + (f", {q['source']}" if q["source"] else "")
        for q in [q for q in questions if q["verdict"] != "right"][:8]
    ]
    return "\n\n".join(
        [
            f"# Where a fact sits: {model}",
            "Share of questions answered right, per position of the asked records and log length (tokens "
            "of the model's tokenizer); n questions per cell:",
            table(accuracy, list(accuracy[0])),
            "Answers by kind (a wrong number's source: whose record holds it):",
            table(misses, list(misses[0])),
            "Attention of the answering row on the asked record's tokens (per layer the mean over heads; "
            "then over the cell's questions); `uniform` is the share even attention would give it:",
            table(attention, list(attention[0])),
            "Mean share over layers per question, " + compare + f"; {verdict}.",
            "Some answers that were not right:",
            "\n".join(examples) or "(none)",
        ]
    )


def plot(cells: list[dict[str, Any]], out: Path, model: str, layers: int) -> None:
    lengths = list(dict.fromkeys(c["length"] for c in cells))
    positions = [p for p in POSITIONS if any(c["position"] == p for c in cells)]
    line_chart(
        {
            p: (
                [c["length"] for c in cells if c["position"] == p],
                [c["accuracy"] for c in cells if c["position"] == p],
            )
            for p in positions
        },
        out / "accuracy.png",
        title=f"{model}: share of questions answered right",
        xlabel="log length (tokens)",
        ylabel="accuracy",
        logx=len(lengths) > 1,
    )
    by = {(c["length"], c["position"]): c for c in cells}
    matrix_grid(
        {
            f"{n} tokens": torch.tensor(
                [by[n, p]["attention_share_by_layer"] if (n, p) in by else [0.0] * layers for p in positions]
            )
            for n in lengths
        },
        out / "attention_by_layer.png",
        title=f"{model}: attention of the answering row on the asked record",
        label="share (mean over heads and questions)",
        xlabel="layer",
        ylabel="position of the facts",
        yticklabels=positions,
    )
    series = {}
    for name in ("right", "wrong"):
        rows = [c[f"attention_share_{name}_by_layer"] for c in cells if c[f"attention_share_{name}_by_layer"]]
        if rows:
            series[f"{name} answers ({name} cells: {len(rows)})"] = (list(range(layers)), _mean_rows(rows))
    line_chart(
        series,
        out / "attention_right_wrong.png",
        title=f"{model}: share on the asked record, right against wrong answers (mean over cells)",
        xlabel="layer",
        ylabel="share (mean over heads)",
    )


def write_needle(
    out: Path,
    engine: Engine,
    args: argparse.Namespace,
    cells: list[dict[str, Any]],
    questions: list[dict[str, Any]],
    partial: bool,
) -> str:
    """Every file of the run; returns the report's text (without its provenance lines)."""
    env = environment(engine, "needle", args, partial)
    write_json(out / "needle.json", {"environment": env, "cells": cells, "questions": questions})
    write_csv(
        out / "questions.csv",
        [{k: v for k, v in q.items() if not isinstance(v, list)} for q in questions],
    )
    text = report(cells, questions, engine.source.model_id)
    head = [*provenance(env), "", *([PARTIAL_NOTE, ""] if partial else [])]
    (out / "report.md").write_text("\n".join([*head, text]) + "\n")
    plot(cells, out, engine.source.model_id, engine.config.num_layers)
    return text
