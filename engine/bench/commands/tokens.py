"""`python -m engine.bench tokens`: the run (its description and flags: engine/bench/flags/tokens.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from transformers import PreTrainedTokenizerBase

from engine.bench.flags.tokens import DEFAULT_TOKENIZERS, QWEN
from engine.bench.reporting.replay_report import table
from engine.bench.reporting.results import provenance, run_environment, write_csv, write_json
from engine.bench.reporting.run_folder import check_out, named_run_dir, written
from engine.errors import EngineError, InvalidArgumentError, PromptError, TokenizerMissingError, TraceError
from engine.loading.sources import resolve
from engine.loading.tokenizer import load_tokenizer, qwen_tokenizer_dir
from engine.traces.records import read_text
from engine.viz.charts import grouped_bars

SAMPLES_DIR = Path(__file__).resolve().parents[1] / "workloads" / "samples"
SAMPLES = {"prose": "prose.txt", "python": "python.txt", "json": "records.json", "numeric log": "sales.log"}
ESTIMATE = 4.0
# The chapter's qwen2.5 figures on its own samples (prose / Python / JSON / a sales log).
CHAPTER_QWEN = {"prose": 5.09, "python": 4.44, "json": 2.46, "numeric log": 1.70}


def load_named(name: str) -> PreTrainedTokenizerBase:
    """`qwen2.5`, or the tokenizer of a model string."""
    folder = qwen_tokenizer_dir() if name == QWEN else resolve(name).tokenizer_dir
    tokenizer = load_tokenizer(folder) if folder is not None else None
    if tokenizer is None:
        raise TokenizerMissingError(f"{name} has no tokenizer")
    return tokenizer


def texts(files: list[str]) -> dict[str, tuple[str, str]]:
    """kind -> (where it came from, text): the shipped samples, then `--files KIND=PATH` over them (regular
    files only, as replay reads traces: a FIFO would block, a device never ends; each kind once)."""
    out = {kind: (f"sample {name}", (SAMPLES_DIR / name).read_text()) for kind, name in SAMPLES.items()}
    given: dict[str, str] = {}
    for spec in files:
        kind, sep, path = spec.partition("=")
        kind = kind.strip()
        if not sep or not kind or not path:
            raise InvalidArgumentError(f"--files {spec!r}: give KIND=PATH, e.g. 'sql=queries.sql'")
        if kind in given:
            raise InvalidArgumentError(
                f"--files: kind {kind!r} given twice ({given[kind]} and {path}): one file a kind"
            )
        given[kind] = path
        try:
            text = read_text(Path(path), f"--files {spec}:")
        except TraceError as e:
            raise PromptError(str(e)) from None
        if not text:
            raise PromptError(f"--files {spec}: {path} is empty")
        out[kind] = (path, text)
    return out


def measure(
    name: str, tokenizer: PreTrainedTokenizerBase, kind: str, source: str, text: str
) -> dict[str, Any]:
    tokens = len(tokenizer(text, add_special_tokens=False).input_ids)
    estimated = len(text) / ESTIMATE
    return {
        "tokenizer": name,
        "kind": kind,
        "source": source,
        "characters": len(text),
        "tokens": tokens,
        "chars_per_token": len(text) / tokens,
        "estimated_tokens": estimated,
        "overshoot": tokens / estimated - 1,
    }


def main(args: argparse.Namespace) -> int:
    check_out(args)
    samples = texts(args.files)
    tokenizers: dict[str, PreTrainedTokenizerBase] = {}
    skipped: list[str] = []
    for name in args.tokenizers or DEFAULT_TOKENIZERS:
        try:
            tokenizers[name] = load_named(name)
        except EngineError as e:
            if args.tokenizers:  # asked for by name: refused, not skipped
                raise
            skipped.append(f"{name}: {e}")
            print(f"[skipped {name}: {e}]", file=sys.stderr)
    if not tokenizers:
        raise TokenizerMissingError("no tokenizer is available: " + "; ".join(skipped))
    rows = [measure(n, t, kind, *samples[kind]) for n, t in tokenizers.items() for kind in samples]
    out = named_run_dir(args, "tokens")
    env = run_environment({"tokenizers": list(tokenizers), "skipped": skipped}, "tokens", args)
    write_json(out / "tokens.json", {"environment": env, "estimate": ESTIMATE, "rows": rows})
    write_csv(out / "tokens.csv", rows)
    text = report(rows, list(samples), skipped)
    (out / "report.md").write_text("\n".join([*provenance(env), "", text]) + "\n")
    grouped_bars(
        list(samples),
        {n: [r["chars_per_token"] for r in rows if r["tokenizer"] == n] for n in tokenizers},
        out / "chars_per_token.png",
        title="Characters per token by kind of text",
        ylabel="characters per token",
        hline=ESTIMATE,
        hline_label=f"the {ESTIMATE:g}-characters estimate",
    )
    print(text)
    return written(out)


def report(rows: list[dict[str, Any]], kinds: list[str], skipped: list[str]) -> str:
    names = list(dict.fromkeys(r["tokenizer"] for r in rows))
    by = {(r["tokenizer"], r["kind"]): r for r in rows}
    cpt = [{"tokenizer": n} | {k: f"{by[n, k]['chars_per_token']:.2f}" for k in kinds} for n in names]
    cpt.append(
        {"tokenizer": "chapter: qwen2.5, its own samples"}
        | {k: f"{CHAPTER_QWEN[k]:.2f}" if k in CHAPTER_QWEN else "-" for k in kinds}
    )
    over = [{"tokenizer": n} | {k: f"{by[n, k]['overshoot']:+.0%}" for k in kinds} for n in names]
    sizes = ", ".join(f"{k} {by[names[0], k]['characters']:,}" for k in kinds)
    return "\n\n".join(
        [
            "# Characters per token",
            f"Characters per token by kind of text (characters: {sizes}); the estimate is {ESTIMATE:g}:",
            table(cpt, list(cpt[0])),
            f"How far a budget sized at {ESTIMATE:g} characters per token is overshot (actual tokens / "
            "estimated − 1; negative: the estimate counts too many tokens and the budget is not filled):",
            table(over, list(over[0])),
            *(["Skipped: " + "; ".join(skipped)] if skipped else []),
        ]
    )
