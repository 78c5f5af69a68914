"""Runs of one prompt through an approximate (or exact) K/V plan, scored against the exact full recompute
of the same final prompt; and their summary per variant. Shared by kv-edit and kv-compose.

The arms of one prompt run back to back in an order rotated from prompt to prompt (each run records its
position), and each prompt's group of arms records the machine's load (`contention`). Only assembling the
prompt's K/V is timed; the hidden states the scores need are recorded in a second, untimed assembly of
the same plan.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from engine.approx.assembly import Segment, assemble, decode_greedy
from engine.approx.fidelity import HiddenStates, compare, hidden_states
from engine.bench.harness.contention import PassLoad, start_pass
from engine.bench.reporting.run_folder import written
from engine.bench.reporting.stats import ALPHA, MIN_PASSES, verdict
from engine.devices import now
from engine.runtime.engine import Engine

SPREAD_NOTE = (
    "Fidelity first: KL (median, max), top-1 and top-10 agreement (rates), centred-logit cosine (median, min), "
    "greedy continuation. TTFT and ttft_ratio: median [min–max] over the n prompts of a row; ttft_ratio is "
    "each prompt's TTFT over the exact recompute's, measured beside it (arms back to back, their order "
    "rotated from prompt to prompt), and `vs_exact` is an exact two-sided sign test of those ratios against "
    f"1 (p in `p`; lower / higher when p ≤ {ALPHA}, too few below n = {MIN_PASSES})."
)
LAYER_NOTE = (
    "Per-layer cosine (plot): the last token's hidden state against the exact run's, each dimension "
    "standardized by its mean and spread over the exact run's prompt tokens, so that a few very large "
    "dimensions do not decide it."
)
SUMMARY_COLUMNS = [
    "variant",
    "n",
    "kl",
    "kl_max",
    "top1",
    "topk",
    "centred_cosine",
    "centred_cosine_min",
    "greedy_same",
    "first_difference",
    "computed_tokens",
    "approximate_tokens",
    "cached_tokens",
    "forwards",
    "ttft_ms",
    "ttft_ratio",
    "vs_exact",
    "p",
]


@dataclass
class Run:
    prompt_tokens: int
    cached_tokens: int
    approximate_tokens: int
    computed_tokens: int
    ttft_s: float  # assembling the prompt's K/V and its last logits (the first token is their argmax)
    tokens: list[int]  # the greedy continuation
    text: str
    logits: torch.Tensor  # next-token logits of the prompt [vocab]
    hidden: HiddenStates  # per layer, recorded in an untimed assembly of the same plan
    forward_rows: list[int]  # rows each forward of the plan's assembly computed (from the untimed assembly)
    position: int = 0  # where this arm ran among its prompt's arms (0: first)


def run_plan(engine: Engine, token_ids: Sequence[int], plan: Sequence[Segment], max_new_tokens: int) -> Run:
    """Assemble (timed, device-synchronized), continue greedily for `max_new_tokens`, then assemble again
    to record the hidden states (both untimed)."""
    t0 = now(engine.device)
    a = assemble(engine, token_ids, plan, capacity=len(token_ids) + max_new_tokens)
    ttft = now(engine.device) - t0
    tokens, _, _ = decode_greedy(engine, a, max_new_tokens)
    with hidden_states(engine.model) as hidden:
        assemble(engine, token_ids, plan)
    text = engine.tokenizer.decode(tokens, skip_special_tokens=True)
    counts = (len(a.token_ids), a.cached_tokens, a.approximate_tokens, a.computed_tokens)
    return Run(*counts, ttft, tokens, text, a.logits.cpu(), hidden, hidden.forward_rows)


def run_arms(
    engine: Engine,
    plans: dict[str, tuple[Sequence[int], Sequence[Segment]]],
    turn: int,
    max_new_tokens: int,
) -> tuple[dict[str, Run], PassLoad]:
    """Every arm (name -> prompt ids and plan) of one prompt, back to back, in the order of `plans` rotated
    by `turn`; and the machine's load while they ran."""
    names = list(plans)
    order = names[turn % len(names) :] + names[: turn % len(names)]
    finish = start_pass(engine.device)
    runs = {}
    for position, name in enumerate(order):
        runs[name] = run_plan(engine, *plans[name], max_new_tokens)
        runs[name].position = position
    return runs, finish()


def score(exact: Run, run: Run, load: PassLoad) -> dict[str, Any]:
    """The run's token counts, TTFT, position among its prompt's arms, whether the machine was contended
    while they ran, and fidelity against the exact run (per-layer cosines as a list)."""
    f = compare(exact.logits, run.logits, exact.tokens, run.tokens, exact.hidden, run.hidden)
    return {
        "prompt_tokens": run.prompt_tokens,
        "cached_tokens": run.cached_tokens,
        "approximate_tokens": run.approximate_tokens,
        "computed_tokens": run.computed_tokens,
        "forwards": len(run.forward_rows),
        "forward_rows": run.forward_rows,
        "ttft_ms": 1000 * run.ttft_s,
        "ttft_ratio": run.ttft_s / exact.ttft_s,
        "position": run.position,
        "contended": load.contended,
        "contention": load.why,
        "text": run.text,
    } | asdict(f)


def summarize_variants(
    rows: Sequence[dict[str, Any]],
    variants: Sequence[str],
    reference: str | None = None,
    unit: str = "prompts",
) -> list[dict[str, Any]]:
    """Per variant: medians (and the worst case) of the fidelity metrics, agreement rates, TTFT and the
    per-prompt TTFT ratio to the exact run measured beside it (median, min and max: `<c>_min`, `<c>_max`,
    shown as `median [min–max]` by `report.table`) with its sign-test verdict (`reference`: the variant
    that is the exact run itself), mean token counts, and the most forwards any of its runs made."""
    return [
        _summary(v, rs, v == reference, unit)
        for v in variants
        if (rs := [r for r in rows if r["variant"] == v])
    ]


def _summary(variant: str, rs: list[dict[str, Any]], is_reference: bool, unit: str) -> dict[str, Any]:
    def med(key: str) -> float:
        return statistics.median(r[key] for r in rs)

    def mean(key: str) -> float:
        return sum(r[key] for r in rs) / len(rs)

    word, p = ("reference", None) if is_reference else verdict([r["ttft_ratio"] for r in rs], 1.0, unit)
    return {
        "variant": variant,
        "n": len(rs),
        "kl": med("kl"),
        "kl_max": max(r["kl"] for r in rs),
        "top1": mean("top1_agree"),
        "topk": mean("topk_agree"),
        "centred_cosine": med("centred_cosine"),
        "centred_cosine_min": min(r["centred_cosine"] for r in rs),
        "greedy_same": mean("continuation_agree"),
        "first_difference": med("first_difference"),
        "computed_tokens": mean("computed_tokens"),
        "approximate_tokens": mean("approximate_tokens"),
        "cached_tokens": mean("cached_tokens"),
        "forwards": max(r["forwards"] for r in rs),
        "ttft_ms": med("ttft_ms"),
        "ttft_ms_min": min(r["ttft_ms"] for r in rs),
        "ttft_ms_max": max(r["ttft_ms"] for r in rs),
        "ttft_ratio": med("ttft_ratio"),
        "ttft_ratio_min": min(r["ttft_ratio"] for r in rs),
        "ttft_ratio_max": max(r["ttft_ratio"] for r in rs),
        "vs_exact": word,
        "p": p,
        "contended": sum(r["contended"] for r in rs),
        "layer_cosine": [statistics.median(c) for c in zip(*(r["layer_cosine"] for r in rs), strict=True)],
    }


def flat(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows for CSV: without their per-layer lists, and the rows per forward as one cell (`190`, `12+3`)."""
    return [
        {k: "+".join(map(str, v)) if k == "forward_rows" else v for k, v in r.items() if k != "layer_cosine"}
        for r in rows
    ]


def finish(engine: Engine, out: Path, report: Sequence[str], printed: str) -> int:
    """Write report.md, print the tables and where the results are (and a notice for random weights)."""
    (out / "report.md").write_text("\n".join(report) + "\n")
    print(printed)
    if engine.source.synthetic:
        print("(synthetic random weights: the timings are real, the answers are not)", file=sys.stderr)
    return written(out)


def shown(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows for a printed table: cosines with five decimals (three would show 0.9998 and 1.0 alike)."""
    cosines = ("centred_cosine", "centred_cosine_min")
    return [r | {k: f"{r[k]:.5f}" for k in cosines if k in r} for r in rows]
