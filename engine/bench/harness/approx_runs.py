"""Runs of one prompt through an approximate (or exact) K/V plan, scored against the exact full recompute
of the same final prompt; and their summary per variant. Shared by kv-edit and kv-compose."""

from __future__ import annotations

import statistics
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from engine.approx.assembly import Segment, assemble, decode_greedy
from engine.approx.fidelity import compare, last_hidden
from engine.bench.reporting.run_folder import written
from engine.devices import now
from engine.runtime.engine import Engine

SPREAD_NOTE = (
    "TTFT and ttft_ratio: median [min–max] over the n prompts of a row; ttft_ratio is each prompt's TTFT over "
    "the exact recompute's, measured beside it (arms interleaved, their order rotated from prompt to prompt)."
)
SUMMARY_COLUMNS = [
    "variant",
    "n",
    "ttft_ms",
    "ttft_ratio",
    "computed_tokens",
    "approximate_tokens",
    "cached_tokens",
    "cosine",
    "cosine_min",
    "kl",
    "kl_max",
    "top1",
    "greedy_same",
    "first_difference",
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
    hidden: list[torch.Tensor]  # per layer, the last prompt token's hidden state


def run_plan(engine: Engine, token_ids: Sequence[int], plan: Sequence[Segment], max_new_tokens: int) -> Run:
    """Assemble (timed, device-synchronized), then continue greedily for `max_new_tokens` (untimed)."""
    with last_hidden(engine.model) as hidden:
        t0 = now(engine.device)
        a = assemble(engine, token_ids, plan, capacity=len(token_ids) + max_new_tokens)
        ttft = now(engine.device) - t0
        states = list(hidden)
    tokens, _, _ = decode_greedy(engine, a, max_new_tokens)
    text = engine.tokenizer.decode(tokens, skip_special_tokens=True)
    return Run(
        len(a.token_ids),
        a.cached_tokens,
        a.approximate_tokens,
        a.computed_tokens,
        ttft,
        tokens,
        text,
        a.logits.cpu(),
        states,
    )


def score(exact: Run, run: Run) -> dict[str, Any]:
    """The run's token counts, TTFT and fidelity against the exact run (per-layer cosines as a list)."""
    f = compare(exact.logits, run.logits, exact.tokens, run.tokens, exact.hidden, run.hidden)
    return {
        "prompt_tokens": run.prompt_tokens,
        "cached_tokens": run.cached_tokens,
        "approximate_tokens": run.approximate_tokens,
        "computed_tokens": run.computed_tokens,
        "ttft_ms": 1000 * run.ttft_s,
        "ttft_ratio": run.ttft_s / exact.ttft_s,
        "text": run.text,
    } | asdict(f)


def summarize_variants(rows: Sequence[dict[str, Any]], variants: Sequence[str]) -> list[dict[str, Any]]:
    """Per variant: medians (and the worst case) of the fidelity metrics, agreement rates, TTFT and the
    per-prompt TTFT ratio to the exact run measured beside it (median, min and max: `<c>_min`, `<c>_max`,
    shown as `median [min–max]` by `report.table`), mean token counts."""
    return [_summary(v, rs) for v in variants if (rs := [r for r in rows if r["variant"] == v])]


def _summary(variant: str, rs: list[dict[str, Any]]) -> dict[str, Any]:
    def med(key: str) -> float:
        return statistics.median(r[key] for r in rs)

    def mean(key: str) -> float:
        return sum(r[key] for r in rs) / len(rs)

    return {
        "variant": variant,
        "n": len(rs),
        "ttft_ms": med("ttft_ms"),
        "ttft_ms_min": min(r["ttft_ms"] for r in rs),
        "ttft_ms_max": max(r["ttft_ms"] for r in rs),
        "ttft_ratio": med("ttft_ratio"),
        "ttft_ratio_min": min(r["ttft_ratio"] for r in rs),
        "ttft_ratio_max": max(r["ttft_ratio"] for r in rs),
        "computed_tokens": mean("computed_tokens"),
        "approximate_tokens": mean("approximate_tokens"),
        "cached_tokens": mean("cached_tokens"),
        "cosine": med("cosine"),
        "cosine_min": min(r["cosine"] for r in rs),
        "kl": med("kl"),
        "kl_max": max(r["kl"] for r in rs),
        "top1": mean("top1_agree"),
        "greedy_same": mean("continuation_agree"),
        "first_difference": med("first_difference"),
        "layer_cosine": [statistics.median(c) for c in zip(*(r["layer_cosine"] for r in rs), strict=True)],
    }


def flat(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows without their per-layer lists, for CSV."""
    return [{k: v for k, v in r.items() if k != "layer_cosine"} for r in rows]


def finish(engine: Engine, out: Path, report: Sequence[str], printed: str) -> int:
    """Write report.md, print the tables and where the results are (and a notice for random weights)."""
    (out / "report.md").write_text("\n".join(report) + "\n")
    print(printed)
    if engine.source.synthetic:
        print("(synthetic random weights: the timings are real, the answers are not)", file=sys.stderr)
    return written(out)


def shown(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows for a printed table: cosines with five decimals (three would show 0.9998 and 1.0 alike)."""
    return [r | {k: f"{r[k]:.5f}" for k in ("cosine", "cosine_min") if k in r} for r in rows]
